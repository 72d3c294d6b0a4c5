// oneDNN's convolution primitives (forward, backward data, backward weights) for
// cpu_window.cpp, on the passes backend_impl::as_library_conv recognises.
//
// Layouts: a primitive is first asked for on the arrays as they lie (NHWC activations, say),
// the weights in oneDNN's choice of layout; where that leaves only oneDNN's reference
// implementation (an axis order no optimised kernel reads, a channels-first source beside a
// channels-last destination, say), every tensor is left to oneDNN's choice and reordered to and
// from it around the primitive. Where even that is the reference implementation, or there is
// none, the caller's im2col computes the convolution.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_eval_impl.hpp"
#include "backend/cpu/cpu_onednn.hpp"
#include "backend/cpu/onednn_runtime.hpp"
#include "backend/layout_plan.hpp"
#include "flaxpp/core/error.hpp"

namespace flaxpp::cpu {
namespace {

using backend_impl::ConvPass;
using backend_impl::ConvTensor;
using backend_impl::LibraryConv;
using dnnl::memory;
using Key = std::vector<std::int64_t>;

struct KeyHash {
  std::size_t operator()(const Key& key) const {
    std::size_t h = key.size();
    for (const std::int64_t v : key)
      h = h * 1000003u ^ std::hash<std::int64_t>{}(v);
    return h;
  }
};

// What a primitive depends on: the convolution, and the threads oneDNN splits it over.
Key key_of(const LibraryConv& c, int threads) {
  Key key = backend_impl::conv_key(c);
  key.push_back(onednn::use_threads(threads));
  return key;
}

// The weights (K, C/G, R...) as oneDNN's grouped weights (G, K/G, C/G, R...) where G > 1.
ConvTensor grouped(const ConvTensor& w, std::int64_t groups) {
  if (groups == 1) return w;
  ConvTensor g = w;
  g.dims[0] /= groups;
  g.dims.insert(g.dims.begin(), groups);
  g.strides.insert(g.strides.begin(), w.strides[0] * g.dims[1]);
  return g;
}

// A contiguous row-major tensor of the same dims (the flipped weights' copy).
ConvTensor packed(const ConvTensor& t) {
  return {t.operand, t.dims, backend_impl::row_major_strides(t.dims)};
}

memory::desc strided(const ConvTensor& t) {
  return memory::desc(t.dims, memory::data_type::f32, t.strides);
}

memory::desc any_layout(const ConvTensor& t) {
  return memory::desc(t.dims, memory::data_type::f32, memory::format_tag::any);
}

// One tensor of a primitive: flaxpp's layout, the primitive's, and the reorder between them
// (into the primitive's for an input, out of it for the result) where they differ.
struct Bound {
  memory::desc user, lib;
  std::shared_ptr<dnnl::reorder> reorder;
};

Bound bind(const memory::desc& user, const memory::desc& lib, bool is_result) {
  Bound b{user, lib, nullptr};
  if (user != lib) {
    const dnnl::engine& e = onednn::engine();
    b.reorder =
        std::make_shared<dnnl::reorder>(is_result ? dnnl::reorder::primitive_desc(e, lib, e, user)
                                                  : dnnl::reorder::primitive_desc(e, user, e, lib));
  }
  return b;
}

struct Primitive {
  dnnl::primitive conv;
  Bound x, w, y;  // as the pass reads and writes them
};

// Memory descriptors of x, w and y.
struct Descs {
  memory::desc x, w, y;
};

template <class Pd>
Primitive finish(const LibraryConv& c, const Pd& pd, const Descs& user, const memory::desc& x,
                 const memory::desc& w, const memory::desc& y) {
  return {dnnl::primitive(pd), bind(user.x, x, c.pass == ConvPass::backward_data),
          bind(user.w, w, c.pass == ConvPass::backward_weights),
          bind(user.y, y, c.pass == ConvPass::forward)};
}

// The primitive for `c` on the descriptors `d` (each a layout or `any`), and the name of the
// implementation oneDNN chose.
std::pair<Primitive, std::string> make(const LibraryConv& c, const Descs& user, const Descs& d) {
  const dnnl::engine& e = onednn::engine();
  const memory::dims strides = c.stride, pad_low = c.pad_low, pad_high = c.pad_high;
  memory::dims dilates = c.dilation;
  for (auto& v : dilates)
    v -= 1;  // oneDNN counts the holes
  const auto prop = dnnl::prop_kind::forward_training;
  const auto algo = dnnl::algorithm::convolution_direct;
#if DNNL_VERSION_MAJOR >= 3
  const dnnl::convolution_forward::primitive_desc forward(e, prop, algo, d.x, d.w, d.y, strides,
                                                          dilates, pad_low, pad_high);
#else
  const dnnl::convolution_forward::primitive_desc forward(
      {prop, algo, d.x, d.w, d.y, strides, dilates, pad_low, pad_high}, e);
#endif
  switch (c.pass) {
    case ConvPass::forward:
      return {
          finish(c, forward, user, forward.src_desc(), forward.weights_desc(), forward.dst_desc()),
          forward.impl_info_str()};
    case ConvPass::backward_data: {
#if DNNL_VERSION_MAJOR >= 3
      const dnnl::convolution_backward_data::primitive_desc pd(e, algo, d.x, d.w, d.y, strides,
                                                               dilates, pad_low, pad_high, forward);
#else
      const dnnl::convolution_backward_data::primitive_desc pd(
          {algo, d.x, d.w, d.y, strides, dilates, pad_low, pad_high}, e, forward);
#endif
      return {finish(c, pd, user, pd.diff_src_desc(), pd.weights_desc(), pd.diff_dst_desc()),
              pd.impl_info_str()};
    }
    case ConvPass::backward_weights: {
#if DNNL_VERSION_MAJOR >= 3
      const dnnl::convolution_backward_weights::primitive_desc pd(
          e, algo, d.x, d.w, d.y, strides, dilates, pad_low, pad_high, forward);
#else
      const dnnl::convolution_backward_weights::primitive_desc pd(
          {algo, d.x, d.w, d.y, strides, dilates, pad_low, pad_high}, e, forward);
#endif
      return {finish(c, pd, user, pd.src_desc(), pd.diff_weights_desc(), pd.diff_dst_desc()),
              pd.impl_info_str()};
    }
  }
  throw Error("as_library_conv: an unknown convolution pass");
}

// The primitive for `c`: on flaxpp's layouts where an optimised kernel reads them, else on
// oneDNN's; nullptr where oneDNN has only its reference implementation or none.
std::shared_ptr<const Primitive> prepare(const LibraryConv& c) {
  const ConvTensor w = grouped(c.flip_w ? packed(c.w) : c.w, c.groups);
  const Descs user{strided(c.x), strided(w), strided(c.y)};
  try {
    auto [p, impl] = make(c, user, {user.x, any_layout(w), user.y});
    if (!onednn::is_reference(impl)) return std::make_shared<const Primitive>(std::move(p));
    auto [q, lib_impl] = make(c, user, {any_layout(c.x), any_layout(w), any_layout(c.y)});
    if (!onednn::is_reference(lib_impl)) return std::make_shared<const Primitive>(std::move(q));
  } catch (const dnnl::error& e) {
    if (e.status != dnnl_unimplemented) throw;
  }
  return nullptr;
}

// w reversed along its spatial axes into a contiguous (K, C/G, R...) copy: the view walked
// from each spatial axis's last element back (rev's gather).
std::vector<float> flipped(const ConvTensor& w, const float* data) {
  backend_impl::StridedCopy copy{w.dims, w.strides};
  for (std::size_t a = 2; a < w.dims.size(); ++a) {
    copy.offset += (w.dims[a] - 1) * w.strides[a];
    copy.strides[a] = -w.strides[a];
  }
  std::vector<float> out(static_cast<std::size_t>(copy.size()));
  gather_strided(data, copy, sizeof(float), out.data());
  return out;
}

// A tensor's memory for the primitive: flaxpp's array itself, or a scratch buffer in the
// primitive's layout (filled by the reorder for an input; reordered back after the run for
// the result).
struct Operand {
  memory user, lib;
};

Operand operand(const Bound& b, float* data, std::vector<std::vector<float>>& scratch) {
  const dnnl::engine& e = onednn::engine();
  memory user(b.user, e, data);
  if (!b.reorder) return {user, user};
  scratch.emplace_back(b.lib.get_size() / sizeof(float) + 1);
  return {user, memory(b.lib, e, scratch.back().data())};
}

std::atomic<std::int64_t> runs{0};

}  // namespace

std::int64_t onednn_conv_runs() {
  return runs.load();
}

bool onednn_conv(const LibraryConv& c, const float* lhs, const float* rhs, float* out,
                 int threads) {
  static onednn::Table<Key, std::shared_ptr<const Primitive>, KeyHash> primitives;
  try {
    const std::shared_ptr<const Primitive> p =
        primitives.get(key_of(c, threads), [&] { return prepare(c); });
    if (!p) return false;
    float* arrays[3] = {const_cast<float*>(lhs), const_cast<float*>(rhs), out};  // inputs read only
    std::vector<float> w_copy;
    if (c.flip_w) w_copy = flipped(c.w, arrays[c.w.operand]);
    float* w_data = c.flip_w ? w_copy.data() : arrays[c.w.operand];
    std::vector<std::vector<float>> scratch;
    scratch.reserve(3);
    const Operand x = operand(p->x, arrays[c.x.operand], scratch);
    const Operand w = operand(p->w, w_data, scratch);
    const Operand y = operand(p->y, arrays[c.y.operand], scratch);
    const bool x_out = c.pass == ConvPass::backward_data,
               w_out = c.pass == ConvPass::backward_weights, y_out = c.pass == ConvPass::forward;
    dnnl::stream& s = onednn::stream();
    for (const auto& [bound, mem, is_result] :
         {std::tuple{&p->x, &x, x_out}, std::tuple{&p->w, &w, w_out}, std::tuple{&p->y, &y, y_out}})
      if (bound->reorder && !is_result)
        bound->reorder->execute(s, {{DNNL_ARG_FROM, mem->user}, {DNNL_ARG_TO, mem->lib}});
    switch (c.pass) {
      case ConvPass::forward:
        p->conv.execute(s,
                        {{DNNL_ARG_SRC, x.lib}, {DNNL_ARG_WEIGHTS, w.lib}, {DNNL_ARG_DST, y.lib}});
        break;
      case ConvPass::backward_data:
        p->conv.execute(
            s, {{DNNL_ARG_DIFF_SRC, x.lib}, {DNNL_ARG_WEIGHTS, w.lib}, {DNNL_ARG_DIFF_DST, y.lib}});
        break;
      case ConvPass::backward_weights:
        p->conv.execute(
            s, {{DNNL_ARG_SRC, x.lib}, {DNNL_ARG_DIFF_WEIGHTS, w.lib}, {DNNL_ARG_DIFF_DST, y.lib}});
        break;
    }
    for (const auto& [bound, mem, is_result] :
         {std::tuple{&p->x, &x, x_out}, std::tuple{&p->w, &w, w_out}, std::tuple{&p->y, &y, y_out}})
      if (bound->reorder && is_result)
        bound->reorder->execute(s, {{DNNL_ARG_FROM, mem->lib}, {DNNL_ARG_TO, mem->user}});
    s.wait();
    runs.fetch_add(1);
    return true;
  } catch (const dnnl::error& e) {
    throw DeviceError(detail::str(
        "oneDNN's convolution failed: ", e.what(), " (status ", static_cast<int>(e.status),
        "); set FLAXPP_CPU_GEMM=blas to convolve with im2col and the BLAS"));
  }
}

}  // namespace flaxpp::cpu
