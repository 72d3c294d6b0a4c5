// CUDA evaluation of dot_general through cuBLAS (cublasGemmStridedBatchedEx) for any
// dimension numbers, planned by layout_plan.hpp's plan_dot exactly as on the CPU. float32 is
// true float32 unless the equation's precision parameter opts into TF32; float64 in float64;
// bf16/f16 operands accumulate in float32 and give bf16/f16 or, with
// preferred_element_type=f32, float32 results.
#include <climits>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_eval_impl.hpp"
#include "flaxpp/core/error.hpp"
#include "flaxpp/core/precision.hpp"
#include "flaxpp/ir/lax.hpp"

namespace flaxpp::cuda {
namespace {

cudaDataType_t cuda_data_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return CUDA_R_32F;
    case DType::f64:
      return CUDA_R_64F;
    case DType::bf16:
      return CUDA_R_16BF;
    case DType::f16:
      return CUDA_R_16F;
    default:
      FLAXPP_ASSERT(false, "cuda_data_type: ", dtype_name(dtype));
  }
}

int blas_int(std::int64_t v) {
  if (v > INT_MAX)
    throw ValueError(detail::str("dot_general: a matrix dimension of ", v,
                                 " exceeds cuBLAS's 32-bit index range; split the operation"));
  return static_cast<int>(v);
}

// An operand as (batch, rows, cols) matrices in device memory: the array's own buffer, or a
// permuted copy on the device when the plan needs one.
struct DeviceMatrices {
  const void* data;
  std::shared_ptr<Buffer> storage;
};

DeviceMatrices as_matrices(const Array& x, const backend_impl::MatrixOperand& plan) {
  if (!plan.needs_permute) return {x.buffer().data(), nullptr};
  std::shared_ptr<Buffer> storage = backend(x.device()).allocate(x.nbytes());
  gather_strided(x.buffer().data(), plan.permute, itemsize(x.dtype()), storage->data(),
                 backend_of(x).stream());
  const void* data = storage->data();
  return {data, std::move(storage)};
}

}  // namespace

Array Families::dot_general(const ir::Primitive& prim, std::span<const Array> inputs,
                            const ir::Params& params, const AVal& out) {
  const Array& lhs = inputs[0];
  const Array& rhs = inputs[1];
  const DType in_dtype = lhs.dtype();
  const bool half = in_dtype == DType::bf16 || in_dtype == DType::f16;
  if (in_dtype != DType::f32 && in_dtype != DType::f64 && !half)
    backend_impl::throw_unsupported_dtype(prim, in_dtype, lhs.device());
  if (out.dtype != in_dtype && !(half && out.dtype == DType::f32))
    throw ValueError(detail::str("dot_general: preferred_element_type ", dtype_name(out.dtype),
                                 " with ", dtype_name(in_dtype),
                                 " operands is not implemented on the CUDA backend; it takes f32 "
                                 "for bf16/f16 operands, or convert the operands instead"));

  const auto& dn = params.get<ir::DotDimensionNumbers>("dimension_numbers");
  const backend_impl::DotPlan p =
      backend_impl::plan_dot(lhs.shape().dims(), rhs.shape().dims(), dn);
  CudaBackend& gpu = backend_of(lhs);
  const Output o(out, lhs.device());
  if (p.batch * p.m * p.n == 0) return o.array();
  if (p.k == 0) {  // an empty sum: zeros (all-zero bytes in every float type)
    FLAXPP_CUDA_CHECK(cudaMemsetAsync(o.data<void>(), 0,
                                      static_cast<std::size_t>(o.array().nbytes()), gpu.stream()));
    return o.array();
  }
  const DeviceMatrices a = as_matrices(lhs, p.lhs);  // (batch, m, k)
  const DeviceMatrices b = as_matrices(rhs, p.rhs);  // (batch, k, n)

  const backend_impl::ColumnMajorGemm g = backend_impl::column_major_gemm(p);
  const cudaDataType_t in_type = cuda_data_type(in_dtype);
  const cudaDataType_t out_type = cuda_data_type(out.dtype);

  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (in_dtype == DType::f64) {
    compute = CUBLAS_COMPUTE_64F;
  } else if (in_dtype == DType::f32) {
    compute = lax::dot_precision(params) == MatmulPrecision::tensorfloat32
                  ? CUBLAS_COMPUTE_32F_FAST_TF32
                  : CUBLAS_COMPUTE_32F;
  }
  const float alpha_f = 1.0f, beta_f = 0.0f;
  const double alpha_d = 1.0, beta_d = 0.0;
  const bool f64 = in_dtype == DType::f64;
  const void* alpha = f64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = f64 ? static_cast<const void*>(&beta_d) : &beta_f;

  auto op = [](bool transpose) { return transpose ? CUBLAS_OP_T : CUBLAS_OP_N; };
  FLAXPP_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      gpu.blas(), op(g.transpose_first), op(g.transpose_second), blas_int(g.m), blas_int(g.n),
      blas_int(g.k), alpha, b.data, in_type, blas_int(g.ld_first), g.stride_first, a.data, in_type,
      blas_int(g.ld_second), g.stride_second, beta, o.data<void>(), out_type, blas_int(g.ld_out),
      g.stride_out, blas_int(g.batch), compute, CUBLAS_GEMM_DEFAULT));
  return o.array();  // permuted operands are freed in stream order, after the product
}

}  // namespace flaxpp::cuda
