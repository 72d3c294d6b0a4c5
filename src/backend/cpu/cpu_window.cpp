// conv_general_dilated, reduce_window_sum / reduce_window_max and select_and_scatter_add on
// the CPU: float32 convolutions on oneDNN's convolution primitives where the engine of float32
// products is oneDNN (cpu.hpp) and the equation is one of its passes (conv_library.hpp), every
// other one as im2col + the CPU's matrix products; the windows' index arithmetic and the
// reductions by flaxpp/kernels/window.hpp, as on CUDA.
#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "backend/cpu/cpu_eval_impl.hpp"
#include "backend/window_plan.hpp"
#ifdef FLAXPP_WITH_ONEDNN
#include "backend/cpu/cpu_gemm_settings.hpp"
#include "backend/cpu/cpu_onednn.hpp"
#endif

namespace flaxpp::cpu {

namespace {

// The most elements one im2col block holds; larger convolutions run block by block of rows.
constexpr std::int64_t kIm2colElements = std::int64_t{1} << 22;

std::int64_t product(const std::int64_t* values, int n) {
  std::int64_t p = 1;
  for (int i = 0; i < n; ++i)
    p *= values[i];
  return p;
}

// conv_general_dilated as im2col + matrix products, per group (of features or of the batch):
// the rows (example, output position) of the group's windows, each window's elements
// (position in the window, input feature) in a row, times the group's kernel as a
// (window * features, out features) matrix. Positions in padding or in an lhs dilation's holes
// stay 0 (kernels::window_source says which).
template <class T>
void conv_im2col(const kernels::ConvGeometry& g, const T* lhs, const T* rhs, T* out) {
  const int spatial = g.spatial;
  const std::int64_t window = product(g.window, spatial), positions = product(g.out_size, spatial);
  const std::int64_t cg = g.in_features, og = g.out_per_group, k = window * cg;
  const std::int64_t rows = g.out_batch * positions, groups = g.out_features / og;
  const std::int64_t block = std::clamp<std::int64_t>(
      kIm2colElements / std::max<std::int64_t>(k, 1), 1, std::max<std::int64_t>(rows, 1));
  std::vector<T> kernel(static_cast<std::size_t>(k * og)), a, c;
  // Each window position's coordinates, unravelled once (row w at w * kMaxWindowRank).
  std::vector<std::int64_t> window_at(static_cast<std::size_t>(window * kernels::kMaxWindowRank));
  for (std::int64_t w = 0; w < window; ++w)
    kernels::unravel(w, g.window, spatial, window_at.data() + w * kernels::kMaxWindowRank);
  std::vector<std::int64_t> out_offset;  // per row of a block: where its results go
  std::int64_t pos[kernels::kMaxWindowRank];
  for (std::int64_t group = 0; group < groups; ++group) {
    for (std::int64_t w = 0; w < window; ++w) {
      const std::int64_t* at = window_at.data() + w * kernels::kMaxWindowRank;
      std::int64_t offset = 0;
      for (int d = 0; d < spatial; ++d)
        offset += at[d] * g.rhs_stride[d];
      for (std::int64_t ch = 0; ch < cg; ++ch)
        for (std::int64_t o = 0; o < og; ++o)
          kernel[static_cast<std::size_t>((w * cg + ch) * og + o)] =
              rhs[(group * og + o) * g.rhs_out_stride + ch * g.rhs_in_stride + offset];
    }
    for (std::int64_t first = 0; first < rows; first += block) {
      const std::int64_t n_rows = std::min(block, rows - first);
      a.assign(static_cast<std::size_t>(n_rows * k), T(0));
      out_offset.resize(static_cast<std::size_t>(n_rows));
      for (std::int64_t r = 0; r < n_rows; ++r) {
        const std::int64_t n = (first + r) / positions;
        kernels::unravel((first + r) % positions, g.out_size, spatial, pos);
        std::int64_t& to = out_offset[static_cast<std::size_t>(r)];
        to = n * g.out_batch_stride;
        for (int d = 0; d < spatial; ++d)
          to += pos[d] * g.out_stride[d];
        const T* base =
            lhs + (g.batch_grouped ? (group * g.out_batch + n) * g.lhs_batch_stride
                                   : n * g.lhs_batch_stride + group * cg * g.lhs_feature_stride);
        T* row = a.data() + r * k;
        for (std::int64_t w = 0; w < window; ++w) {
          const std::int64_t* at = window_at.data() + w * kernels::kMaxWindowRank;
          std::int64_t offset = 0;
          bool inside = true;
          for (int d = 0; d < spatial && inside; ++d) {
            const std::int64_t e =
                kernels::window_source(pos[d], at[d], g.window_stride[d], g.rhs_dilation[d],
                                       g.pad_low[d], g.lhs_dilation[d], g.lhs_size[d]);
            inside = e >= 0;
            offset += e * g.lhs_stride[d];
          }
          if (!inside) continue;
          for (std::int64_t ch = 0; ch < cg; ++ch)
            row[w * cg + ch] = base[offset + ch * g.lhs_feature_stride];
        }
      }
      c.resize(static_cast<std::size_t>(n_rows * og));
      if (k == 0)
        std::fill(c.begin(), c.end(), T(0));
      else
        matmul(n_rows, og, k, a.data(), kernel.data(), c.data());
      for (std::int64_t r = 0; r < n_rows; ++r) {
        const std::int64_t offset = out_offset[static_cast<std::size_t>(r)];
        for (std::int64_t o = 0; o < og; ++o)
          out[offset + (group * og + o) * g.out_feature_stride] =
              c[static_cast<std::size_t>(r * og + o)];
      }
    }
  }
}

// The convolution on oneDNN, where it is one of oneDNN's passes and products run there;
// false otherwise.
template <class T>
bool conv_onednn([[maybe_unused]] std::span<const Array> in,
                 [[maybe_unused]] const ir::Params& params, [[maybe_unused]] const AVal& out,
                 [[maybe_unused]] T* result) {
#ifdef FLAXPP_WITH_ONEDNN
  if constexpr (std::is_same_v<T, float>) {
    const GemmSettings settings = gemm_settings();
    if (settings.engine != GemmEngine::onednn) return false;
    const auto c = backend_impl::as_library_conv(in[0].shape().dims(), in[1].shape().dims(),
                                                 out.shape.dims(), params);
    if (!c) return false;
    if (c->x_shrunk && c->pass == backend_impl::ConvPass::backward_data)
      std::fill(result, result + out.shape.size(), 0.0f);
    return onednn_conv(*c, in_data<float>(in[0]), in_data<float>(in[1]), result, settings.threads);
  }
#endif
  return false;
}

}  // namespace

Array Families::conv_general_dilated(const ir::Primitive& prim, std::span<const Array> in,
                                     const ir::Params& params, const AVal& out) {
  const kernels::ConvGeometry g = backend_impl::conv_geometry(
      in[0].shape().dims(), in[1].shape().dims(), out.shape.dims(), params);
  return visit_dtype<kFloat>(prim, out.dtype, [&]<class T>(TypeTag<T>) {
    const Output o(out);
    if (g.count > 0 && !conv_onednn(in, params, out, o.data<T>()))
      conv_im2col(g, in_data<T>(in[0]), in_data<T>(in[1]), o.data<T>());
    return o.array();
  });
}

namespace {

// The trailing axes a window passes through unchanged (size-1 window, stride 1, no padding or
// dilation): their elements are reduced side by side, as contiguous runs, so that only the
// leading axes pay for the window's index arithmetic (a pool over NHWC runs along C).
int passthrough_from(const kernels::WindowGeometry& g) {
  int a = g.rank;
  while (a > 0 && g.window[a - 1] == 1 && g.stride[a - 1] == 1 && g.pad_low[a - 1] == 0 &&
         g.base_dilation[a - 1] == 1 && g.in_size[a - 1] == g.out_size[a - 1])
    --a;
  return a;
}

}  // namespace

template <bool kMax>
Array Families::reduce_window(const ir::Primitive& prim, std::span<const Array> in,
                              const ir::Params& params, const AVal& out) {
  kernels::WindowGeometry g =
      backend_impl::window_geometry(in[0].shape().dims(), out.shape.dims(), params);
  const int lead = passthrough_from(g);
  const std::int64_t run = product(g.in_size + lead, g.rank - lead);
  g.rank = lead;  // the leading axes' geometry; offsets count runs
  return visit_dtype<kFloat>(prim, out.dtype, [&]<class T>(TypeTag<T>) {
    const Output o(out);
    const T* xs = in_data<T>(in[0]);
    T* ys = o.data<T>();
    const T init = kMax ? -std::numeric_limits<T>::infinity() : T(0);
    const std::int64_t outputs = run == 0 ? 0 : out.shape.size() / run;
    std::int64_t at[kernels::kMaxWindowRank], k[kernels::kMaxWindowRank];
    for (std::int64_t i = 0; i < outputs; ++i) {
      T* y = ys + i * run;
      std::fill(y, y + run, init);
      kernels::unravel(i, g.out_size, g.rank, at);
      std::fill(k, k + kernels::kMaxWindowRank, 0);
      do {
        const std::int64_t e = kernels::window_element(g, at, k);
        if (e < 0) continue;
        const T* x = xs + e * run;
        for (std::int64_t j = 0; j < run; ++j)
          kernels::window_accumulate<kMax>(y[j], x[j]);
      } while (kernels::next_window_position(g, k));
    }
    return o.array();
  });
}

FLAXPP_EVAL_INSTANTIATE_REDUCE_WINDOW;

Array Families::select_and_scatter_add(const ir::Primitive& prim, std::span<const Array> in,
                                       const ir::Params& params, const AVal& out) {
  const kernels::WindowGeometry g =
      backend_impl::window_geometry(out.shape.dims(), in[0].shape().dims(), params);
  return visit_dtype<kFloat>(prim, out.dtype, [&]<class T>(TypeTag<T>) {
    const Output o(out);
    const T *source = in_data<T>(in[0]), *operand = in_data<T>(in[1]);
    T* ys = o.data<T>();
    for (std::int64_t i = 0; i < out.shape.size(); ++i)
      ys[i] = kernels::select_and_scatter_element<T>(g, source, operand, i);
    return o.array();
  });
}

}  // namespace flaxpp::cpu
