// The host side of the CUDA backend's products, checked without a GPU: for every kind of
// dot_general layout, the column-major GEMM arguments handed to cuBLAS
// (backend_impl::column_major_gemm), run through a reference column-major strided batched GEMM
// written from cuBLAS's documented semantics, give the CPU backend's dot_general exactly.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/lax.hpp"
#include "harness/dot_cases.hpp"
#include "src/backend/layout_plan.hpp"

using namespace flaxpp;
using backend_impl::ColumnMajorGemm;
using backend_impl::StridedCopy;

namespace {

// The operand's elements in the order of a planned gather (row-major over copy.dims).
std::vector<double> gather(const std::vector<double>& x, const StridedCopy& copy) {
  std::vector<double> out(static_cast<std::size_t>(copy.size()));
  for (std::int64_t i = 0; i < copy.size(); ++i) {
    std::int64_t rest = i, offset = 0;
    for (std::size_t k = copy.dims.size(); k-- > 0;) {
      offset += rest % copy.dims[k] * copy.strides[k];
      rest /= copy.dims[k];
    }
    out[static_cast<std::size_t>(i)] = x[static_cast<std::size_t>(offset)];
  }
  return out;
}

// cublasGemmStridedBatchedEx with alpha 1, beta 0: per batch element b,
// C[i + j ldc] = sum_l op(A)(i, l) op(B)(l, j), op(X)(i, l) = X[i + l ld] or, transposed,
// X[l + i ld]; A is the first argument, B the second.
std::vector<double> reference_gemm(const ColumnMajorGemm& g, const std::vector<double>& first,
                                   const std::vector<double>& second) {
  std::vector<double> c(static_cast<std::size_t>(g.batch * g.stride_out), -1.0);
  for (std::int64_t b = 0; b < g.batch; ++b)
    for (std::int64_t j = 0; j < g.n; ++j)
      for (std::int64_t i = 0; i < g.m; ++i) {
        double sum = 0;
        for (std::int64_t l = 0; l < g.k; ++l) {
          const std::int64_t ai = g.transpose_first ? l + i * g.ld_first : i + l * g.ld_first;
          const std::int64_t bi = g.transpose_second ? j + l * g.ld_second : l + j * g.ld_second;
          sum += first[static_cast<std::size_t>(b * g.stride_first + ai)] *
                 second[static_cast<std::size_t>(b * g.stride_second + bi)];
        }
        c[static_cast<std::size_t>(b * g.stride_out + i + j * g.ld_out)] = sum;
      }
  return c;
}

// Small integers: every sum is exact, so the two must agree bit for bit.
std::vector<double> integers(std::int64_t n, int salt) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = static_cast<double>((i * 7 + salt * 3) % 11 - 5);
  return v;
}

}  // namespace

TEST_CASE("column_major_gemm: cuBLAS's arguments give dot_general for every layout") {
  for (const testing::DotCase& c : testing::dot_cases()) {
    CAPTURE(c.name);
    const std::vector<double> lhs = integers(c.lhs.size(), 1), rhs = integers(c.rhs.size(), 2);
    const Array expected = lax::dot_general(Array::from_vector(lhs, c.lhs),
                                            Array::from_vector(rhs, c.rhs), c.dn);
    const backend_impl::DotPlan p = backend_impl::plan_dot(c.lhs.dims(), c.rhs.dims(), c.dn);
    const std::vector<double> a = p.lhs.needs_permute ? gather(lhs, p.lhs.permute) : lhs;
    const std::vector<double> b = p.rhs.needs_permute ? gather(rhs, p.rhs.permute) : rhs;
    const ColumnMajorGemm g = backend_impl::column_major_gemm(p);
    // cuBLAS's rules for its arguments: ld >= rows of the stored matrix.
    CHECK(g.ld_first >= (g.transpose_first ? g.k : g.m));
    CHECK(g.ld_second >= (g.transpose_second ? g.n : g.k));
    CHECK(g.ld_out >= g.m);
    CHECK(reference_gemm(g, b, a) == expected.to_vector<double>());
  }
}
