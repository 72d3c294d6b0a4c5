// CPU evaluation of dot_general for any dimension numbers: float32 on oneDNN's matmul (one
// call for the whole batch) or the BLAS, float64 on the BLAS (one call per batch element), as
// cpu::gemm_settings() says. f32 accumulates in f32, as JAX's CPU backend does.
// dot_general_bias adds its bias to the fresh product.
#include <algorithm>
#include <climits>
#include <type_traits>

#include "backend/cpu/cpu_blas.hpp"
#include "backend/cpu/cpu_eval_impl.hpp"
#include "backend/cpu/cpu_gemm_settings.hpp"
#include "backend/cpu/cpu_parallel.hpp"
#ifdef FLAXPP_WITH_ONEDNN
#include "backend/cpu/cpu_onednn.hpp"
#endif
#include "flaxpp/core/error.hpp"
#include "flaxpp/kernels/elementwise.hpp"

namespace flaxpp::cpu {
namespace {

// An operand's elements as a batch of row-major matrices, read as the plan says; a permuted
// copy when the plan needs one (outside memory accounting).
template <class T>
struct MatrixBatch {
  const T* data;
  std::vector<T> storage;
};

template <class T>
MatrixBatch<T> as_matrix_batch(const Array& x, const backend_impl::MatrixOperand& plan) {
  const T* data = in_data<T>(x);
  if (!plan.needs_permute) return {data, {}};
  std::vector<T> storage(static_cast<std::size_t>(x.size()));
  gather_strided(data, plan.permute, sizeof(T), storage.data());
  const T* permuted = storage.data();
  return {permuted, std::move(storage)};
}

int blas_int(std::int64_t v) {
  if (v > INT_MAX)
    throw ValueError(detail::str("dot_general: a matrix dimension of ", v,
                                 " exceeds BLAS's 32-bit index range; split the operation"));
  return static_cast<int>(v);
}

// Per batch element C (m, n) = A (m, k) · B (k, n), each stored transposed where asked, on
// the engine gemm_settings() names: oneDNN's matmul (float32, one call for the batch) or the
// BLAS (one call per batch element).
template <class T>
void gemm_batched(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                  bool transpose_a, bool transpose_b, const T* a, const T* b, T* c) {
  const GemmSettings settings = gemm_settings();
#ifdef FLAXPP_WITH_ONEDNN
  if constexpr (std::is_same_v<T, float>) {
    if (settings.engine == GemmEngine::onednn) {
      onednn_gemm({batch, m, n, k, transpose_a, transpose_b}, a, b, c, settings.threads);
      return;
    }
  }
#endif
  const int lda = blas_int(transpose_a ? m : k);
  const int ldb = blas_int(transpose_b ? k : n);
  const Blas& lib = blas();
  lib.use_threads(settings.threads);
  const auto ta = static_cast<Transpose>(transpose_a);
  const auto tb = static_cast<Transpose>(transpose_b);
  for (std::int64_t i = 0; i < batch; ++i)
    lib.gemm(ta, tb, blas_int(m), blas_int(n), blas_int(k), a + i * m * k, lda, b + i * k * n,
             ldb, c + i * m * n, blas_int(n));
}

// The result (batch, lhs free, rhs free) is (B, M, N) row-major: per batch element, the
// (M, K) lhs matrix times the (K, N) rhs matrix.
template <class T>
Array dot_general_t(const Array& lhs, const Array& rhs, const ir::DotDimensionNumbers& dn,
                    const AVal& out) {
  const backend_impl::DotPlan p =
      backend_impl::plan_dot(lhs.shape().dims(), rhs.shape().dims(), dn);
  const Output o(out);
  T* c = o.data<T>();  // (batch, m, n)
  if (p.batch * p.m * p.n == 0) return o.array();
  if (p.k == 0) {  // an empty sum
    std::fill(c, c + p.batch * p.m * p.n, T(0));
    return o.array();
  }
#ifdef FLAXPP_WITH_ONEDNN
  // oneDNN reads a permuted operand where it is, with its strides, where it has a kernel for
  // that layout: no permuted copy.
  if constexpr (std::is_same_v<T, float>) {
    const GemmSettings settings = gemm_settings();
    if (settings.engine == GemmEngine::onednn && (p.lhs.needs_permute || p.rhs.needs_permute) &&
        !p.lhs.dims.empty() && !p.rhs.dims.empty() &&
        onednn_strided_gemm({p.lhs.dims, p.lhs.strides, p.rhs.dims, p.rhs.strides}, in_data<T>(lhs),
                            in_data<T>(rhs), c, settings.threads))
      return o.array();
  }
#endif
  const MatrixBatch<T> a = as_matrix_batch<T>(lhs, p.lhs);  // (batch, m, k)
  const MatrixBatch<T> b = as_matrix_batch<T>(rhs, p.rhs);  // (batch, k, n)
  gemm_batched(p.batch, p.m, p.n, p.k, p.lhs.transposed, p.rhs.transposed, a.data, b.data, c);
  return o.array();
}

}  // namespace

template <class T>
void matmul(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, const T* b, T* c) {
  gemm_batched(1, m, n, k, false, false, a, b, c);
}
template void matmul(std::int64_t, std::int64_t, std::int64_t, const float*, const float*, float*);
template void matmul(std::int64_t, std::int64_t, std::int64_t, const double*, const double*,
                     double*);

Array Families::dot_general(const ir::Primitive& prim, std::span<const Array> inputs,
                            const ir::Params& params, const AVal& out) {
  const Array& lhs = inputs[0];
  const Array& rhs = inputs[1];
  if (params.has("preferred_element_type") &&
      params.get<DType>("preferred_element_type") != lhs.dtype())
    throw ValueError(detail::str(
        "dot_general: preferred_element_type ",
        dtype_name(params.get<DType>("preferred_element_type")), " with ", dtype_name(lhs.dtype()),
        " operands is not implemented on the CPU backend; convert the operands instead"));
  const auto& dn = params.get<ir::DotDimensionNumbers>("dimension_numbers");
  return visit_dtype<kFloat>(
      prim, lhs.dtype(), [&]<class T>(TypeTag<T>) { return dot_general_t<T>(lhs, rhs, dn, out); });
}

// The product, then the bias added to each of its rows in place while the product is fresh
// (the add's functor, so the bits of dot_general and add; rows shared among the CPU's
// threads): no broadcast bias is made.
Array Families::dot_general_bias(const ir::Primitive& prim, std::span<const Array> inputs,
                                 const ir::Params& params, const AVal& out) {
  const Array product = dot_general(prim, inputs.first(2), params, out);
  const Array& bias = inputs[2];
  visit_dtype<kFloat, void>(prim, product.dtype(), [&]<class T>(TypeTag<T>) {
    T* y = const_cast<T*>(in_data<T>(product));  // fresh: held by nothing else
    const T* b = in_data<T>(bias);
    const std::int64_t n = bias.size();
    const std::int64_t rows = n == 0 ? 0 : product.size() / n;
    parallel_rows(rows, n, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r)
        for (std::int64_t j = 0; j < n; ++j)
          y[r * n + j] = kernels::Add{}(y[r * n + j], b[j]);
    });
  });
  return product;
}

}  // namespace flaxpp::cpu
