// CPU evaluation of dot_general through BLAS (sgemm/dgemm, one call per batch element) for
// any dimension numbers. f32 accumulates in f32, as JAX's CPU backend does.
#include <cblas.h>

#include <algorithm>
#include <climits>

#include "backend/cpu/cpu_eval_impl.hpp"
#include "flaxpp/core/error.hpp"

namespace flaxpp::cpu {
namespace {

void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b,
          int ldb, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}

void gemm(bool trans_a, bool trans_b, int m, int n, int k, const double* a, int lda,
          const double* b, int ldb, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

std::int64_t product(const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& axes) {
  std::int64_t p = 1;
  for (const std::int64_t a : axes)
    p *= dims[static_cast<std::size_t>(a)];
  return p;
}

// Axes of a rank-`rank` operand that are neither batch nor contracting, ascending (the
// order in which they appear in the result).
std::vector<std::int64_t> free_axes(std::int64_t rank, const std::vector<std::int64_t>& batch,
                                    const std::vector<std::int64_t>& contracting) {
  std::vector<std::int64_t> free;
  for (std::int64_t a = 0; a < rank; ++a)
    if (std::find(batch.begin(), batch.end(), a) == batch.end() &&
        std::find(contracting.begin(), contracting.end(), a) == contracting.end())
      free.push_back(a);
  return free;
}

// An operand's elements as a batch of row-major matrices; `transposed` when each matrix is
// stored as the transpose of the one BLAS is asked to multiply.
template <class T>
struct MatrixBatch {
  const T* data;
  bool transposed;
  std::vector<T> storage;  // a permuted copy, when one was needed (outside memory accounting)
};

bool is_identity(const std::vector<std::int64_t>& order) {
  for (std::size_t i = 0; i < order.size(); ++i)
    if (order[i] != static_cast<std::int64_t>(i)) return false;
  return true;
}

std::vector<std::int64_t> concat(const std::vector<std::int64_t>& a,
                                 const std::vector<std::int64_t>& b,
                                 const std::vector<std::int64_t>& c) {
  std::vector<std::int64_t> out(a);
  out.insert(out.end(), b.begin(), b.end());
  out.insert(out.end(), c.begin(), c.end());
  return out;
}

// The operand as (batch, first, second) matrices, where `first` and `second` are its free
// and contracting axis groups in the order BLAS wants. Already (batch, first, second) or
// (batch, second, first) in memory: no copy (the latter is read transposed). Any other
// layout is permuted into a temporary.
template <class T>
MatrixBatch<T> as_matrix_batch(const Array& x, const std::vector<std::int64_t>& batch,
                               const std::vector<std::int64_t>& first,
                               const std::vector<std::int64_t>& second) {
  const T* data = in_data<T>(x);
  const std::vector<std::int64_t> order = concat(batch, first, second);
  if (is_identity(order)) return {data, false, {}};
  if (is_identity(concat(batch, second, first))) return {data, true, {}};
  const std::vector<std::int64_t>& dims = x.shape().dims();
  const std::vector<std::int64_t> strides = row_major_strides(dims);
  std::vector<std::int64_t> out_dims, out_strides;
  for (const std::int64_t a : order) {
    out_dims.push_back(dims[static_cast<std::size_t>(a)]);
    out_strides.push_back(strides[static_cast<std::size_t>(a)]);
  }
  std::vector<T> storage(static_cast<std::size_t>(x.size()));
  gather_strided(data, out_dims, out_strides, sizeof(T), storage.data());
  const T* permuted = storage.data();
  return {permuted, false, std::move(storage)};
}

int blas_int(std::int64_t v) {
  if (v > INT_MAX)
    throw ValueError(detail::str("dot_general: a matrix dimension of ", v,
                                 " exceeds BLAS's 32-bit index range; split the operation"));
  return static_cast<int>(v);
}

// The result (batch, lhs free, rhs free) is (B, M, N) row-major: per batch element, the
// (M, K) lhs matrix times the (K, N) rhs matrix.
template <class T>
Array dot_general_t(const Array& lhs, const Array& rhs, const ir::DotDimensionNumbers& dn,
                    const AVal& out) {
  const std::vector<std::int64_t> lhs_free =
      free_axes(lhs.rank(), dn.lhs_batch, dn.lhs_contracting);
  const std::vector<std::int64_t> rhs_free =
      free_axes(rhs.rank(), dn.rhs_batch, dn.rhs_contracting);
  const std::int64_t batch = product(lhs.shape().dims(), dn.lhs_batch);
  const std::int64_t m = product(lhs.shape().dims(), lhs_free);
  const std::int64_t k = product(lhs.shape().dims(), dn.lhs_contracting);
  const std::int64_t n = product(rhs.shape().dims(), rhs_free);

  const Output o(out);
  T* c = o.data<T>();  // (batch, m, n)
  if (batch * m * n == 0) return o.array();
  if (k == 0) {  // an empty sum
    std::fill(c, c + batch * m * n, T(0));
    return o.array();
  }
  // lhs as (batch, m, k); stored (batch, k, m) it is read transposed.
  const MatrixBatch<T> a = as_matrix_batch<T>(lhs, dn.lhs_batch, lhs_free, dn.lhs_contracting);
  // rhs as (batch, k, n); stored (batch, n, k) it is read transposed.
  const MatrixBatch<T> b = as_matrix_batch<T>(rhs, dn.rhs_batch, dn.rhs_contracting, rhs_free);
  const int lda = blas_int(a.transposed ? m : k);
  const int ldb = blas_int(b.transposed ? k : n);
  for (std::int64_t i = 0; i < batch; ++i)
    gemm(a.transposed, b.transposed, blas_int(m), blas_int(n), blas_int(k), a.data + i * m * k, lda,
         b.data + i * k * n, ldb, c + i * m * n, blas_int(n));
  return o.array();
}

}  // namespace

Array eval_dot_general(const ir::Primitive& prim, std::span<const Array> inputs,
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

}  // namespace flaxpp::cpu
