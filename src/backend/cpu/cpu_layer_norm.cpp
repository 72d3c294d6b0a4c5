// CPU evaluation of the layer_norm primitives, row by row, with the shared per-row math of
// kernels/layer_norm.hpp. Sums accumulate in the element type, as XLA's CPU backend does.
#include "backend/cpu/cpu_eval_impl.hpp"
#include "kernels/layer_norm.hpp"

namespace flaxpp::cpu {
namespace {

template <class T>
kernels::LayerNormStats<T> row_stats(const T* x, std::int64_t f, double epsilon) {
  T sum = 0, sum_sq = 0;
  for (std::int64_t i = 0; i < f; ++i) {
    sum += x[i];
    sum_sq += x[i] * x[i];
  }
  return kernels::layer_norm_stats(sum, sum_sq, static_cast<T>(f), static_cast<T>(epsilon));
}

// The operand's last-axis size and the number of rows.
std::pair<std::int64_t, std::int64_t> rows_of(const Array& x) {
  const std::int64_t f = x.shape().dims().back();
  return {f == 0 ? 0 : x.size() / f, f};
}

}  // namespace

Array Families::layer_norm(const ir::Primitive& prim, std::span<const Array> in,
                           const ir::Params& params, const AVal& out) {
  const double epsilon = params.get<double>("epsilon");
  return visit_dtype<kFloat>(prim, in[0].dtype(), [&]<class T>(TypeTag<T>) {
    const auto [rows, f] = rows_of(in[0]);
    const T* x = in_data<T>(in[0]);
    const T* scale = in_data<T>(in[1]);
    const T* bias = in_data<T>(in[2]);
    const Output o(out);
    T* y = o.data<T>();
    for (std::int64_t r = 0; r < rows; ++r) {
      const kernels::LayerNormStats<T> s = row_stats(x + r * f, f, epsilon);
      for (std::int64_t i = 0; i < f; ++i)
        y[r * f + i] = kernels::layer_norm_y(x[r * f + i], s, scale[i], bias[i]);
    }
    return o.array();
  });
}

Array Families::layer_norm_dx(const ir::Primitive& prim, std::span<const Array> in,
                              const ir::Params& params, const AVal& out) {
  const double epsilon = params.get<double>("epsilon");
  return visit_dtype<kFloat>(prim, in[0].dtype(), [&]<class T>(TypeTag<T>) {
    const auto [rows, f] = rows_of(in[0]);
    const T* x = in_data<T>(in[0]);
    const T* scale = in_data<T>(in[1]);
    const T* dy = in_data<T>(in[2]);
    const Output o(out);
    T* dx = o.data<T>();
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * f;
      const T* dyr = dy + r * f;
      const kernels::LayerNormStats<T> s = row_stats(xr, f, epsilon);
      T sum_g = 0, sum_g_xhat = 0;
      for (std::int64_t i = 0; i < f; ++i) {
        const T g = dyr[i] * scale[i];
        sum_g += g;
        sum_g_xhat += g * kernels::layer_norm_xhat(xr[i], s);
      }
      const T mean_g = sum_g / static_cast<T>(f), mean_g_xhat = sum_g_xhat / static_cast<T>(f);
      for (std::int64_t i = 0; i < f; ++i)
        dx[r * f + i] = kernels::layer_norm_dx(
            dyr[i] * scale[i], kernels::layer_norm_xhat(xr[i], s), mean_g, mean_g_xhat, s.rstd);
    }
    return o.array();
  });
}

Array Families::layer_norm_dscale(const ir::Primitive& prim, std::span<const Array> in,
                                  const ir::Params& params, const AVal& out) {
  const double epsilon = params.get<double>("epsilon");
  return visit_dtype<kFloat>(prim, in[0].dtype(), [&]<class T>(TypeTag<T>) {
    const auto [rows, f] = rows_of(in[0]);
    const T* x = in_data<T>(in[0]);
    const T* dy = in_data<T>(in[1]);
    const Output o(out);
    T* dscale = o.data<T>();
    std::fill(dscale, dscale + f, T(0));
    for (std::int64_t r = 0; r < rows; ++r) {
      const kernels::LayerNormStats<T> s = row_stats(x + r * f, f, epsilon);
      for (std::int64_t i = 0; i < f; ++i)
        dscale[i] += dy[r * f + i] * kernels::layer_norm_xhat(x[r * f + i], s);
    }
    return o.array();
  });
}

}  // namespace flaxpp::cpu
