// CUDA evaluation of dot_general through cuBLAS (cublasGemmStridedBatchedEx) for any
// dimension numbers, planned by layout_plan.hpp's plan_dot exactly as on the CPU. float32 is
// true float32 unless the equation's precision parameter opts into TF32; float64 in float64;
// bf16/f16 operands accumulate in float32 and give bf16/f16 or, with
// preferred_element_type=f32, float32 results. dot_general_bias adds its bias in cuBLASLt's
// epilogue (CUBLASLT_EPILOGUE_BIAS), or after the product where cuBLASLt has no algorithm
// for it.
#include <cublasLt.h>

#include <climits>
#include <cstdio>
#include <memory>
#include <mutex>

#include "backend/cuda/cublaslt_bias_key.hpp"
#include "backend/cuda/cublaslt_bias_plans.hpp"
#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_eval_impl.hpp"
#include "flaxpp/core/error.hpp"
#include "flaxpp/core/precision.hpp"
#include "flaxpp/ir/lax.hpp"
#include "kernels/add_bias.hpp"

namespace flaxpp::cuda {
namespace {

cudaDataType_t cuda_data_type(DType dtype) {
  constexpr PerDType<cudaDataType_t> kTypes(CUDA_R_32F, CUDA_R_64F, CUDA_R_16BF, CUDA_R_16F,
                                            CUDA_R_32I, CUDA_R_32U, CUDA_R_8U);
  return kTypes[dtype];
}

int blas_int(std::int64_t v) {
  if (v > INT_MAX)
    throw ValueError(detail::str("dot_general: a matrix dimension of ", v,
                                 " exceeds cuBLAS's 32-bit index range; split the operation"));
  return static_cast<int>(v);
}

// cuBLAS's alpha = 1 and beta = 0 in the scale type of the product: double for float64,
// float otherwise.
struct UnitScale {
  float alpha_f = 1.0f, beta_f = 0.0f;
  double alpha_d = 1.0, beta_d = 0.0;
  const void* alpha(bool f64) const { return f64 ? static_cast<const void*>(&alpha_d) : &alpha_f; }
  const void* beta(bool f64) const { return f64 ? static_cast<const void*>(&beta_d) : &beta_f; }
};

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

LtOwned<cublasLtMatrixLayoutOpaque_t> lt_layout(cudaDataType_t type, bool transposed,
                                                std::int64_t rows, std::int64_t cols,
                                                std::int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  // A transposed operand is stored (cols, rows), column-major.
  FLAXPP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(
      &layout, type, static_cast<std::uint64_t>(transposed ? cols : rows),
      static_cast<std::uint64_t>(transposed ? rows : cols), ld));
  return LtOwned<cublasLtMatrixLayoutOpaque_t>(layout);
}

std::uint32_t alignment_of(const void* p) {
  return pointer_alignment(reinterpret_cast<std::uintptr_t>(p));
}

// Says once per process that a product takes its bias after the GEMM because cuBLASLt's
// heuristic gave no algorithm. Any answer but success counts as that, not only NOT_SUPPORTED:
// PyTorch met INVALID_VALUE for one-row operands, and the plain GEMM and a bias kernel compute
// the same product, so a jitted step must not fail there (desk review 2 #2).
void say_no_epilogue(const LtBiasKey& g, cublasStatus_t status) {
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr,
                 "flaxpp: cuBLASLt has no bias-epilogue algorithm for a (%lld x %lld) x (%lld x "
                 "%lld) product (%s); such products add their bias in a kernel after the GEMM "
                 "(said once)\n",
                 static_cast<long long>(g.m), static_cast<long long>(g.k),
                 static_cast<long long>(g.k), static_cast<long long>(g.n),
                 status == CUBLAS_STATUS_SUCCESS ? "no algorithm found"
                                                 : cublasGetStatusName(status));
  });
}

// The plan for `key`: its descriptor (with `bias` as the bias pointer, which the heuristic may
// look at), layouts, and the heuristic's algorithm, or unusable where there is none.
LtBiasPlan make_plan(cublasLtHandle_t lt, const LtBiasKey& key, const void* bias) {
  const auto type = static_cast<cudaDataType_t>(key.data_type);
  const cudaDataType_t scale = type == CUDA_R_64F ? CUDA_R_64F : CUDA_R_32F;
  LtBiasPlan plan;
  cublasLtMatmulDesc_t raw_desc = nullptr;
  FLAXPP_CUBLAS_CHECK(cublasLtMatmulDescCreate(
      &raw_desc, static_cast<cublasComputeType_t>(key.compute_type), scale));
  plan.desc.reset(raw_desc);
  const cublasOperation_t op_first = key.transpose_first ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = key.transpose_second ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  FLAXPP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc.get(), CUBLASLT_MATMUL_DESC_TRANSA,
                                                     &op_first, sizeof op_first));
  FLAXPP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc.get(), CUBLASLT_MATMUL_DESC_TRANSB,
                                                     &op_second, sizeof op_second));
  FLAXPP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
      plan.desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
  FLAXPP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
      plan.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  plan.first = lt_layout(type, key.transpose_first, key.m, key.k, key.ld_first);
  plan.second = lt_layout(type, key.transpose_second, key.k, key.n, key.ld_second);
  plan.out = lt_layout(type, false, key.m, key.n, key.ld_out);

  // The preference only steers the heuristic: it is not kept.
  cublasLtMatmulPreference_t raw_pref = nullptr;
  FLAXPP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_pref));
  const LtOwned<cublasLtMatmulPreferenceOpaque_t> pref(raw_pref);
  const std::size_t workspace_bytes = CudaBackend::kBlasWorkspaceBytes;
  FLAXPP_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace_bytes, sizeof workspace_bytes));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, std::uint32_t> aligned[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_first},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_second},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_out},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_out}};
  for (const auto& [attribute, align] : aligned)
    FLAXPP_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref.get(), attribute, &align, sizeof align));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(lt, plan.desc.get(), plan.first.get(), plan.second.get(),
                                     plan.out.get(), plan.out.get(), pref.get(), 1, &heuristic,
                                     &found);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    say_no_epilogue(key, status);
    return plan;
  }
  plan.algo = heuristic.algo;
  plan.usable = true;
  return plan;
}

// d = op(first) op(second) + bias as one cuBLASLt matmul with the BIAS epilogue: the bias has
// one element per row of the column-major d (per rhs free element of the row-major product),
// added in the compute type before d is stored. False, with nothing queued, for a product the
// epilogue is not asked for (bias_epilogue_applies) or when cuBLASLt's heuristic gives no
// algorithm for it, whatever its status. The plan is made once per key (the backend's
// lt_bias_plans()); only the bias pointer changes from call to call.
bool matmul_bias_epilogue(CudaBackend& gpu, const backend_impl::ColumnMajorGemm& g,
                          cudaDataType_t type, cublasComputeType_t compute, const void* first,
                          const void* second, const void* bias, void* d) {
  if (!bias_epilogue_applies(g.m, g.n, g.k, g.batch, alignment_of(bias))) return false;
  const LtBiasKey key{.m = g.m,
                      .n = g.n,
                      .k = g.k,
                      .ld_first = g.ld_first,
                      .ld_second = g.ld_second,
                      .ld_out = g.ld_out,
                      .transpose_first = g.transpose_first,
                      .transpose_second = g.transpose_second,
                      .data_type = static_cast<int>(type),
                      .compute_type = static_cast<int>(compute),
                      .align_first = alignment_of(first),
                      .align_second = alignment_of(second),
                      .align_out = alignment_of(d)};
  // A cuBLAS handle is a cuBLASLt handle (cuBLAS's documentation), bound to the same stream.
  const auto lt = reinterpret_cast<cublasLtHandle_t>(gpu.blas());
  void* workspace = gpu.blas_workspace();
  const bool f64 = type == CUDA_R_64F;
  return gpu.lt_bias_plans().with_plan(
      key, [&] { return make_plan(lt, key, bias); },
      [&](const LtBiasPlan& plan) {
        if (!plan.usable) return false;
        FLAXPP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
            plan.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        const UnitScale unit;
        FLAXPP_CUBLAS_CHECK(cublasLtMatmul(lt, plan.desc.get(), unit.alpha(f64), first,
                                           plan.first.get(), second, plan.second.get(),
                                           unit.beta(f64), d, plan.out.get(), d, plan.out.get(),
                                           &plan.algo, workspace, CudaBackend::kBlasWorkspaceBytes,
                                           gpu.stream()));
        return true;
      });
}

// dot_general, and with `bias` dot_general_bias.
Array product(const ir::Primitive& prim, std::span<const Array> inputs, const ir::Params& params,
              const AVal& out, const Array* bias) {
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
  // The bias where cuBLASLt's epilogue did not take it (its shape rule made it float32 or
  // float64, one element per column of the (m, n) row-major product).
  const auto add_bias = [&] {
    if (bias == nullptr) return;
    const cudaError_t launched =
        out.dtype == DType::f64 ? kernels::launch_add_bias(o.data<double>(), in_data<double>(*bias),
                                                           p.m, p.n, gpu.stream())
                                : kernels::launch_add_bias(o.data<float>(), in_data<float>(*bias),
                                                           p.m, p.n, gpu.stream());
    check_launch(launched, prim.name().c_str());
  };
  if (p.k == 0) {  // an empty sum: zeros (all-zero bytes in every float type)
    FLAXPP_CUDA_CHECK(cudaMemsetAsync(o.data<void>(), 0,
                                      static_cast<std::size_t>(o.array().nbytes()), gpu.stream()));
    add_bias();
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
  if (bias != nullptr &&
      matmul_bias_epilogue(gpu, g, in_type, compute, b.data, a.data, bias->buffer().data(),
                           o.data<void>()))
    return o.array();

  const bool f64 = in_dtype == DType::f64;
  const UnitScale unit;

  auto op = [](bool transpose) { return transpose ? CUBLAS_OP_T : CUBLAS_OP_N; };
  FLAXPP_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      gpu.blas(), op(g.transpose_first), op(g.transpose_second), blas_int(g.m), blas_int(g.n),
      blas_int(g.k), unit.alpha(f64), b.data, in_type, blas_int(g.ld_first), g.stride_first, a.data,
      in_type, blas_int(g.ld_second), g.stride_second, unit.beta(f64), o.data<void>(), out_type,
      blas_int(g.ld_out), g.stride_out, blas_int(g.batch), compute, CUBLAS_GEMM_DEFAULT));
  add_bias();
  return o.array();  // permuted operands are freed in stream order, after the product
}

}  // namespace

Array Families::dot_general(const ir::Primitive& prim, std::span<const Array> inputs,
                            const ir::Params& params, const AVal& out) {
  return product(prim, inputs, params, out, nullptr);
}

Array Families::dot_general_bias(const ir::Primitive& prim, std::span<const Array> inputs,
                                 const ir::Params& params, const AVal& out) {
  return product(prim, inputs.first(2), params, out, &inputs[2]);
}

}  // namespace flaxpp::cuda
