// Private to the backends: a conv_general_dilated equation as one of the three convolutions
// the libraries implement (oneDNN on the CPU, cuDNN on CUDA): forward, backward data or
// backward weights of a forward convolution (stride, dilation, padding, feature groups).
//
// JAX's transpose rules (src/ir/primitives/convolution.cpp) write both cotangents of a
// convolution as convolutions again, so the library's backward passes are recognised here
// rather than named in the graph:
//   - an lhs-dilated, unit-stride convolution of the output's cotangent with the spatially
//     reversed kernel is the backward data pass of the forward convolution whose stride is the
//     lhs dilation (as XLA's GPU convolution rewriter recognises it);
//   - a convolution whose window (the output's cotangent) is larger than its result (the
//     kernel's cotangent) is the backward weights pass, with the stride and dilation swapped
//     back and batch and feature roles exchanged.
// Both descriptions compute the same sums; the choice only picks the library's kernel.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "flaxpp/ir/params.hpp"

namespace flaxpp::backend_impl {

enum class ConvPass { forward, backward_data, backward_weights };

// One tensor of the forward convolution as the libraries order its axes (source and
// destination: batch, features, spatial; weights: out features, in features per group,
// spatial), laid over one of the equation's arrays (0: lhs, 1: rhs, 2: the result) by element
// strides.
struct ConvTensor {
  int operand = 0;
  std::vector<std::int64_t> dims, strides;
};

struct LibraryConv {
  ConvPass pass = ConvPass::forward;
  // The forward convolution's source x, weights w and destination y. The pass computes y
  // (forward), x (backward data) or w (backward weights) from the other two.
  ConvTensor x, w, y;
  std::int64_t groups = 1;  // feature groups: x's features / w's in features
  // Per spatial axis. dilation 1 is none; padding is non-negative on both sides, and x's last
  // positions that no window reaches are fewer than a stride: the libraries' size rule
  // y = (pad_low + x + pad_high - ((w - 1) * dilation + 1)) / stride + 1 (rounding down) holds.
  std::vector<std::int64_t> stride, dilation, pad_low, pad_high;
  bool flip_w = false;  // w is its array reversed along the spatial axes (backward data)
  // x covers fewer positions than its array: a stride or more of its trailing ones, which no
  // window reaches, are left out. Where x is the result (backward data) the rest of the array
  // is zero and must be cleared first.
  bool x_shrunk = false;
};

// The equation's convolution as a library pass, or nullopt where it is none of the three
// (batch groups, negative low padding, an lhs dilation with strides or feature groups, empty
// arrays): the backend's own kernel computes those.
std::optional<LibraryConv> as_library_conv(const std::vector<std::int64_t>& lhs_dims,
                                           const std::vector<std::int64_t>& rhs_dims,
                                           const std::vector<std::int64_t>& out_dims,
                                           const ir::Params& params);

// `conv` as numbers, equal exactly where two descriptions are: the key of the backends' tables
// of library primitives and plans.
std::vector<std::int64_t> conv_key(const LibraryConv& conv);

}  // namespace flaxpp::backend_impl
