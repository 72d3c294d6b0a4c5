// cuDNN's convolution forward, backward data and backward filter as graph-API operation graphs
// (cudnn_conv.hpp). Tensors are cuDNN's (N, C, spatial...) and (K, C/G, spatial...) over
// flaxpp's arrays by strides, at least 4-D: a convolution over one spatial axis gets a second,
// of size 1. Feature groups are what cuDNN infers from x's features and w's. A pass over the
// spatially reversed kernel (backward data as JAX writes it) is cuDNN's CUDNN_CONVOLUTION mode,
// which flips the filter; the others are cross-correlations. cuDNN's filters are packed with
// the input features innermost (KRSC, beside channels-last data) or after the output features
// (KCRS): a kernel in another layout (Flax's HWIO) is repacked into a scratch buffer around the
// pass, as XLA transposes it for cuDNN.
#include "backend/cuda/cudnn_conv.hpp"

#include "backend/cuda/cuda_eval.hpp"

#ifdef FLAXPP_WITH_CUDNN
#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/cuda_eval_impl.hpp"
#include "backend/cuda/cudnn_graph.hpp"
#include "backend/layout_plan.hpp"
#include "flaxpp/core/error.hpp"
#endif

namespace flaxpp::cuda {

#ifndef FLAXPP_WITH_CUDNN

std::int64_t cudnn_conv_executions() {
  return 0;
}
bool cudnn_conv(CudaBackend&, DType, const backend_impl::LibraryConv&, const void*, const void*,
                void*) {
  return false;
}

#else

namespace {

using backend_impl::ConvPass;
using backend_impl::ConvTensor;
using backend_impl::LibraryConv;
using cudnn::Descriptor;
using cudnn::Plan;
using cudnn::Rejected;

enum Uid : std::int64_t { kX = 1, kW, kY };

// cuDNN takes two or three spatial axes.
constexpr std::size_t kMinRank = 4, kMaxRank = 5;

// A tensor of the convolution, at least kMinRank axes (a trailing spatial axis of size 1).
std::unique_ptr<Descriptor> tensor(Uid uid, cudnnDataType_t type, const ConvTensor& t) {
  std::vector<std::int64_t> dims = t.dims, strides = t.strides;
  while (dims.size() < kMinRank) {
    dims.push_back(1);
    strides.push_back(1);
  }
  return cudnn::tensor(uid, type, dims, strides);
}

// The order of w's axes (K, C, R...) from outermost to innermost in cuDNN's packed filter
// beside data whose features are innermost (KRSC) or not (KCRS).
std::vector<std::size_t> filter_order(const LibraryConv& c) {
  const std::size_t rank = c.w.dims.size();
  std::vector<std::size_t> order{0};
  const bool channels_last = c.x.strides[1] == 1;
  if (!channels_last) order.push_back(1);
  for (std::size_t a = 2; a < rank; ++a)
    order.push_back(a);
  if (channels_last) order.push_back(1);
  return order;
}

// w packed in `order`: its strides, per axis of (K, C, R...).
std::vector<std::int64_t> packed_strides(const ConvTensor& w,
                                         const std::vector<std::size_t>& order) {
  std::vector<std::int64_t> ordered_dims;
  for (const std::size_t a : order)
    ordered_dims.push_back(w.dims[a]);
  const std::vector<std::int64_t> ordered = backend_impl::row_major_strides(ordered_dims);
  std::vector<std::int64_t> strides(w.dims.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    strides[order[i]] = ordered[i];
  return strides;
}

// A per-spatial-axis parameter, with `fill` for the added axis.
std::vector<std::int64_t> spatial(std::vector<std::int64_t> values, std::int64_t fill) {
  while (values.size() + 2 < kMinRank)
    values.push_back(fill);
  return values;
}

Plan conv_plan(cudnnHandle_t handle, DType dtype, const LibraryConv& c) {
  Plan p;
  const cudnnDataType_t type = cudnn::data_type(dtype), compute = CUDNN_DATA_FLOAT;
  auto x = tensor(kX, type, c.x), w = tensor(kW, type, c.w), y = tensor(kY, type, c.y);
  const std::vector<std::int64_t> strides = spatial(c.stride, 1),
                                  dilations = spatial(c.dilation, 1), pre = spatial(c.pad_low, 0),
                                  post = spatial(c.pad_high, 0);
  const auto axes = static_cast<std::int64_t>(strides.size());
  const cudnnConvolutionMode_t mode = c.flip_w ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION;
  auto conv = std::make_unique<Descriptor>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  conv->set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode)
      .set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &axes)
      .set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, dilations.data(), axes)
      .set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, strides.data(), axes)
      .set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, pre.data(), axes)
      .set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, post.data(), axes);
  conv->finalize("convolution descriptor");
  const float alpha = 1.0f, beta = 0.0f;  // float scaling for float accumulation
  std::unique_ptr<Descriptor> op;
  switch (c.pass) {
    case ConvPass::forward:
      op = std::make_unique<Descriptor>(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, *x)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, *w)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, *y)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, *conv)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, &alpha)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, &beta);
      break;
    case ConvPass::backward_data:
      op = std::make_unique<Descriptor>(
          CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, *x)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, *w)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, *y)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, *conv)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, &alpha)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, &beta);
      break;
    case ConvPass::backward_weights:
      op = std::make_unique<Descriptor>(
          CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, *x)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, *w)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, *y)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, *conv)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, &alpha)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, &beta);
      break;
  }
  op->finalize("convolution operation");
  // float32 data in true float32, as cuBLAS computes flaxpp's float32 products.
  const cudnnBackendNumericalNote_t tf32[] = {CUDNN_NUMERICAL_NOTE_TENSOR_CORE};
  cudnn::finish_plan(
      p, handle, *op,
      dtype == DType::f32 ? std::span(tf32) : std::span<const cudnnBackendNumericalNote_t>{});
  for (auto* part : {&x, &w, &y, &conv, &op})
    p.parts.push_back(std::move(*part));
  return p;
}

// A configuration: (device, dtype, the convolution).
using Key = std::tuple<int, DType, std::vector<std::int64_t> >;
using State = cudnn::PlanCache<Key, Plan>;

State& state() {
  static auto* const s = new State();
  return *s;
}

const char* pass_name(ConvPass pass) {
  switch (pass) {
    case ConvPass::forward:
      return "forward";
    case ConvPass::backward_data:
      return "backward data";
    case ConvPass::backward_weights:
      return "backward filter";
  }
  return "?";
}

// The copy of w (axes `from_strides` apart in its array) into the layout of `to_strides`,
// written row-major over the axes ordered by to_strides (outermost first).
backend_impl::StridedCopy repack(const ConvTensor& w, const std::vector<std::int64_t>& from_strides,
                                 const std::vector<std::int64_t>& to_strides) {
  std::vector<std::size_t> order(w.dims.size());
  for (std::size_t a = 0; a < order.size(); ++a)
    order[a] = a;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return to_strides[a] > to_strides[b]; });
  backend_impl::StridedCopy copy;
  for (const std::size_t a : order) {
    copy.dims.push_back(w.dims[a]);
    copy.strides.push_back(from_strides[a]);
  }
  return copy;
}

}  // namespace

std::int64_t cudnn_conv_executions() {
  return state().executions();
}

// Builds (once) and runs the plan (cudnn::PlanCache::run says when it returns false).
bool cudnn_conv(CudaBackend& gpu, DType dtype, const LibraryConv& conv, const void* lhs,
                const void* rhs, void* out) {
  if (!cudnn_allowed() || conv.x_shrunk || conv.x.dims.size() > kMaxRank ||
      !(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16))
    return false;
  // The pass on cuDNN's filter layout; w's array is repacked where it lies otherwise.
  LibraryConv c = conv;
  c.w.strides = packed_strides(c.w, filter_order(c));
  const bool repacked = c.w.strides != conv.w.strides;
  const Key key{gpu.device().index, dtype, backend_impl::conv_key(c)};
  State& s = state();
  return s.run(
      gpu, key,
      [&](cudnnHandle_t handle) {
        Plan* plan = s.find(gpu, key);
        if (plan == nullptr) plan = &s.keep(gpu, key, conv_plan(handle, dtype, c));
        void* arrays[3] = {const_cast<void*>(lhs), const_cast<void*>(rhs),
                           out};  // inputs read only
        void* w = arrays[c.w.operand];
        const std::size_t bytes = itemsize(dtype);
        std::shared_ptr<Buffer> scratch;  // freed in stream order, after the pass
        const bool w_is_result = c.pass == ConvPass::backward_weights;
        if (repacked) {
          std::int64_t elements = 1;
          for (const std::int64_t d : c.w.dims)
            elements *= d;
          scratch = gpu.allocate(elements * static_cast<std::int64_t>(bytes));
          if (!w_is_result)
            gather_strided(w, repack(c.w, conv.w.strides, c.w.strides), bytes, scratch->data(),
                           gpu.stream());
        }
        cudnn::execute(gpu, handle, *plan, {kX, kW, kY},
                       {arrays[c.x.operand], repacked ? scratch->data() : w, arrays[c.y.operand]});
        if (repacked && w_is_result)
          gather_strided(scratch->data(), repack(c.w, c.w.strides, conv.w.strides), bytes, w,
                         gpu.stream());
        return true;
      },
      [&] {
        return detail::str("convolution ", pass_name(c.pass), " (", dtype_short_name(dtype), ", ",
                           c.x.dims.size() - 2, " spatial axes)");
      });
}

#endif  // FLAXPP_WITH_CUDNN

}  // namespace flaxpp::cuda
