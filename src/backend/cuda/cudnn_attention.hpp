// cuDNN's fused attention (flash attention, forward and backward) for the dot_product_attention
// primitives on CUDA, built through cuDNN's frontend (its header-only C++ library: the
// scaled-dot-product-attention graph is dozens of backend operations, which the frontend
// composes and cuDNN's heuristics turn into one fused kernel). It takes float16 and bfloat16
// operands without a bias or mask, with or without is_causal, grouped-query heads included;
// the logsumexp it writes is the primitive's second result, natural-log as flaxpp's. A graph is
// built once per configuration and kept (cudnn::PlanCache). In builds without cuDNN's frontend
// (FLAXPP_WITH_CUDNN_FRONTEND) nothing is registered and the executions count stays 0.
#pragma once

namespace flaxpp::cuda {

// Registers cuDNN's attention as CUDA's lax::AttentionKernel, where the build has it.
void register_cudnn_attention();
// cudnn_attention_executions() is declared in cuda_eval.hpp, for the tests.

}  // namespace flaxpp::cuda
