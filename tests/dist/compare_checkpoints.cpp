// compare_checkpoints A B RTOL [ATOL]: exit 0 when checkpoints A and B hold the same paths,
// shapes and dtypes, and float leaves within |a - b| <= ATOL + RTOL |b| (numpy.allclose;
// ATOL 1e-7), other leaves equal. Prints each leaf's largest difference. For the data-parallel
// train tests (tests/dist/test_dist_train.sh): a run of N processes against a run of one.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "flaxpp/core/error.hpp"
#include "flaxpp/io/checkpoint.hpp"
#include "flaxpp/ops/numpy.hpp"

using namespace flaxpp;

int main(int argc, char** argv) try {
  if (argc != 4 && argc != 5) {
    std::cerr << "usage: compare_checkpoints A B RTOL [ATOL]\n";
    return 2;
  }
  const double rtol = std::stod(argv[3]), atol = argc == 5 ? std::stod(argv[4]) : 1e-7;
  const auto a = io::load_checkpoint(argv[1]).flatten(), b = io::load_checkpoint(argv[2]).flatten();
  if (a.size() != b.size()) {
    std::cout << "the checkpoints have " << a.size() << " and " << b.size() << " leaves\n";
    return 1;
  }
  bool ok = true;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto& [path, x] = a[i];
    const auto& [path_b, y] = b[i];
    if (path != path_b || x.aval() != y.aval()) {
      std::cout << path << " " << x.aval() << " against " << path_b << " " << y.aval() << "\n";
      return 1;
    }
    const std::vector<double> u = astype(x, DType::f64).to_vector<double>();
    const std::vector<double> v = astype(y, DType::f64).to_vector<double>();
    const bool exact = !is_floating(x.dtype());
    double worst = 0, excess = 0;
    for (std::size_t j = 0; j < u.size(); ++j) {
      const double d = std::abs(u[j] - v[j]);
      worst = std::max(worst, d);
      excess = std::max(excess, d - (exact ? 0.0 : atol + rtol * std::abs(v[j])));
    }
    ok = ok && excess <= 0;
    std::printf("%-40s max |a - b| %.3g%s\n", path.c_str(), worst, excess > 0 ? "  FAILED" : "");
  }
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << "compare_checkpoints: " << e.what() << "\n";
  return 2;
}
