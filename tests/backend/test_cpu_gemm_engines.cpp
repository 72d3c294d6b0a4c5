// The CPU's two float32 product engines (include/flaxpp/backend/cpu.hpp): oneDNN's matmul and
// the BLAS agree with a float64 product in every layout dot_general plans, with batch
// dimensions; oneDNN gives the same bits run after run at a given thread count; the settings
// refuse what they cannot honour. The arrays live on the CPU whatever the suite's default device.
#include <doctest/doctest.h>

#include "harness/cpu_settings_guard.hpp"
#include "harness/eval_cases.hpp"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "flaxpp/backend/cpu.hpp"
#include "flaxpp/core/array.hpp"
#include "flaxpp/core/error.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"

using namespace flaxpp;
using namespace flaxpp::testing;

namespace {

Array random_cpu(const Shape& shape, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(shape.size()));
  for (float& x : v)
    x = u(gen);
  return Array::from_vector(v, shape, Device::cpu());
}

struct Layout {
  const char* name;
  Shape lhs, rhs;
  ir::DotDimensionNumbers dn;
  std::int64_t k;  // the contracted length
};

// Shapes of an MLP step (forward, and the weight gradient contracting the batch) and of a
// transformer's attention (batched, either operand transposed), plus odd sizes.
std::vector<Layout> layouts() {
  return {
      {"(128, 256) x (256, 96)", {128, 256}, {256, 96}, dims({1}, {0}), 256},
      {"lhs transposed: (256, 33) contracted on dim 0", {256, 33}, {256, 70}, dims({0}, {0}), 256},
      {"rhs transposed: (33, 100) x (70, 100)", {33, 100}, {70, 100}, dims({1}, {1}), 100},
      {"both transposed", {100, 33}, {70, 100}, dims({0}, {1}), 100},
      {"batched (4, 17, 64) x (4, 64, 17)", {4, 17, 64}, {4, 64, 17}, dims({2}, {1}, {0}, {0}), 64},
      {"batched, rhs transposed (attention scores)",
       {3, 31, 16},
       {3, 31, 16},
       dims({2}, {2}, {0}, {0}),
       16},
      {"batch dims in the middle (a permuted copy)",
       {9, 2, 40},
       {40, 2, 5},
       dims({2}, {0}, {1}, {1}),
       40},
      {"matrix-vector", {65, 129}, {129}, dims({1}, {0}), 129},
      // An attention's einsums on (B, T, N, H) arrays: batch axes 0 and 2, read in place by
      // oneDNN with strides (attention_layouts).
      {"BTNH,BSNH->BNTS", {2, 17, 3, 16}, {2, 19, 3, 16}, dims({3}, {3}, {0, 2}, {0, 2}), 16},
      {"BNTS,BSNH->BNTH", {2, 3, 17, 19}, {2, 19, 3, 16}, dims({3}, {1}, {0, 1}, {0, 2}), 19},
  };
}

// The layouts above whose operands dot_general would permute into a copy, but whose rows and
// columns each walk memory as one axis: oneDNN reads them in place.
std::vector<Layout> attention_layouts() {
  std::vector<Layout> all = layouts();
  return {all.end() - 2, all.end()};
}

std::vector<float> product(const Layout& l, const Array& lhs, const Array& rhs) {
  return lax::dot_general(lhs, rhs, l.dn).to_vector<float>();
}

}  // namespace

TEST_CASE("cpu gemm engines: oneDNN and the BLAS match a float64 product in every layout") {
  const CpuSettingsGuard guard;
  std::vector<cpu::GemmEngine> engines = {cpu::GemmEngine::blas};
  if (cpu::has_onednn()) engines.push_back(cpu::GemmEngine::onednn);
  unsigned seed = 1;
  for (const Layout& l : layouts()) {
    const Array lhs = random_cpu(l.lhs, seed++);
    const Array rhs = random_cpu(l.rhs, seed++);
    const std::vector<double> exact =
        lax::dot_general(astype(lhs, DType::f64), astype(rhs, DType::f64), l.dn)
            .to_vector<double>();
    // Terms of at most 1 in magnitude: float32 sums stay within k ulps of 1 of the exact value.
    const double tolerance = static_cast<double>(l.k) * 1.2e-7;
    for (const cpu::GemmEngine engine : engines) {
      cpu::set_gemm_engine(engine);
      const std::vector<float> got = product(l, lhs, rhs);
      CAPTURE(std::string(l.name));
      CAPTURE(cpu::gemm_engine_name(engine));
      REQUIRE(got.size() == exact.size());
      double worst = 0;
      for (std::size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, std::abs(static_cast<double>(got[i]) - exact[i]));
      CHECK(worst <= tolerance);
    }
  }
}

TEST_CASE("cpu gemm engines: oneDNN reads a permuted operand in place, with its strides") {
  if (!cpu::has_onednn()) return;
  const CpuSettingsGuard guard;
  cpu::set_gemm_engine(cpu::GemmEngine::onednn);
  unsigned seed = 100;
  for (const Layout& l : attention_layouts()) {
    CAPTURE(std::string(l.name));
    const Array lhs = random_cpu(l.lhs, seed++);
    const Array rhs = random_cpu(l.rhs, seed++);
    const std::int64_t before = cpu::onednn_strided_products();
    const std::vector<float> in_place = product(l, lhs, rhs);
    CHECK(cpu::onednn_strided_products() == before + 1);
    // The same products from the operands permuted into contiguous copies first.
    cpu::set_gemm_engine(cpu::GemmEngine::blas);
    const std::vector<float> permuted = product(l, lhs, rhs);
    cpu::set_gemm_engine(cpu::GemmEngine::onednn);
    REQUIRE(in_place.size() == permuted.size());
    for (std::size_t i = 0; i < in_place.size(); ++i)
      CHECK(std::abs(in_place[i] - permuted[i]) <= static_cast<float>(l.k) * 2.4e-7f);
  }
}

// oneDNN picks its kernel and its split of the work per thread count, so the sums may differ
// between counts (here the batched product with the rhs transposed differs between 1 and 2
// threads); at one count they are the same every time.
TEST_CASE("cpu gemm engines: oneDNN gives the same bits run after run at a given thread count") {
  if (!cpu::has_onednn()) return;
  const CpuSettingsGuard guard;
  cpu::set_gemm_engine(cpu::GemmEngine::onednn);
  unsigned seed = 100;
  for (const int threads : {1, 2}) {
    cpu::set_num_threads(threads);
    for (const Layout& l : layouts()) {
      CAPTURE(std::string(l.name));
      CAPTURE(threads);
      const Array lhs = random_cpu(l.lhs, seed++);
      const Array rhs = random_cpu(l.rhs, seed++);
      const std::vector<float> first = product(l, lhs, rhs);
      CHECK(product(l, lhs, rhs) == first);
      CHECK(product(l, lhs, rhs) == first);
    }
  }
}

TEST_CASE("cpu gemm engines: the settings refuse what they cannot honour") {
  const CpuSettingsGuard guard;
  CHECK_THROWS_WITH_AS(cpu::set_num_threads(-1), doctest::Contains("expected a positive number"),
                       ValueError);
  if (!cpu::has_onednn())
    CHECK_THROWS_WITH_AS(cpu::set_gemm_engine(cpu::GemmEngine::onednn),
                         doctest::Contains("built without oneDNN"), ValueError);
  cpu::set_gemm_engine(cpu::GemmEngine::blas);
  CHECK(cpu::gemm_engine() == cpu::GemmEngine::blas);
  CHECK(cpu::gemm_engine_name(cpu::gemm_engine()) == "blas");
}
