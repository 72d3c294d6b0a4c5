// CPU evaluation of the layer_norm primitives, row by row, with the shared per-row math of
// kernels/layer_norm.hpp. Sums accumulate in the element type, as XLA's CPU backend does. The
// forward pass and dx share their rows among the CPU's threads (cpu_parallel.hpp); dscale, a
// sum over rows, shares its columns, each summed in row order.
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_eval_impl.hpp"
#include "backend/cpu/cpu_parallel.hpp"
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

// One primitive of the family: `body(T tag, rows, f, epsilon, out)` fills the result buffer.
template <class Body>
Array by_rows(const ir::Primitive& prim, std::span<const Array> in, const ir::Params& params,
              const AVal& out, Body body) {
  const double epsilon = params.get<double>("epsilon");
  return visit_dtype<kFloat>(prim, in[0].dtype(), [&]<class T>(TypeTag<T> tag) {
    const auto [rows, f] = backend_impl::last_axis_rows(in[0].shape().dims());
    const Output o(out);
    body(tag, rows, f, epsilon, o.data<T>());
    return o.array();
  });
}

}  // namespace

Array Families::layer_norm(const ir::Primitive& prim, std::span<const Array> in,
                           const ir::Params& params, const AVal& out) {
  return by_rows(prim, in, params, out,
                 [&]<class T>(TypeTag<T>, std::int64_t rows, std::int64_t f, double epsilon, T* y) {
                   const T* x = in_data<T>(in[0]);
                   const T* scale = in_data<T>(in[1]);
                   const T* bias = in_data<T>(in[2]);
                   parallel_rows(rows, f, [&](std::int64_t begin, std::int64_t end) {
                     for (std::int64_t r = begin; r < end; ++r) {
                       const kernels::LayerNormStats<T> s = row_stats(x + r * f, f, epsilon);
                       for (std::int64_t i = 0; i < f; ++i)
                         y[r * f + i] = kernels::layer_norm_y(x[r * f + i], s, scale[i], bias[i]);
                     }
                   });
                 });
}

Array Families::layer_norm_dx(const ir::Primitive& prim, std::span<const Array> in,
                              const ir::Params& params, const AVal& out) {
  return by_rows(
      prim, in, params, out,
      [&]<class T>(TypeTag<T>, std::int64_t rows, std::int64_t f, double epsilon, T* dx) {
        const T* scale = in_data<T>(in[1]);
        parallel_rows(rows, f, [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t r = begin; r < end; ++r) {
            const T* xr = in_data<T>(in[0]) + r * f;
            const T* dyr = in_data<T>(in[2]) + r * f;
            const kernels::LayerNormStats<T> s = row_stats(xr, f, epsilon);
            T sum_g = 0, sum_g_xhat = 0;
            for (std::int64_t i = 0; i < f; ++i) {
              const T g = dyr[i] * scale[i];
              sum_g += g;
              sum_g_xhat += g * kernels::layer_norm_xhat(xr[i], s);
            }
            const T mean_g = sum_g / static_cast<T>(f);
            const T mean_g_xhat = sum_g_xhat / static_cast<T>(f);
            for (std::int64_t i = 0; i < f; ++i)
              dx[r * f + i] =
                  kernels::layer_norm_dx(dyr[i] * scale[i], kernels::layer_norm_xhat(xr[i], s),
                                         mean_g, mean_g_xhat, s.rstd);
          }
        });
      });
}

Array Families::layer_norm_dscale(const ir::Primitive& prim, std::span<const Array> in,
                                  const ir::Params& params, const AVal& out) {
  return by_rows(
      prim, in, params, out,
      [&]<class T>(TypeTag<T>, std::int64_t rows, std::int64_t f, double epsilon, T* dscale) {
        const T* x = in_data<T>(in[0]);
        const T* dy = in_data<T>(in[1]);
        // Per-row statistics: two values a row, host scratch outside memory accounting.
        std::vector<kernels::LayerNormStats<T>> stats(static_cast<std::size_t>(rows));
        parallel_rows(rows, f, [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t r = begin; r < end; ++r)
            stats[static_cast<std::size_t>(r)] = row_stats(x + r * f, f, epsilon);
        });
        // Each column sums its rows in row order, whichever thread takes it.
        parallel_columns(rows, f, [&](std::int64_t begin, std::int64_t end) {
          std::fill(dscale + begin, dscale + end, T(0));
          for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t i = begin; i < end; ++i)
              dscale[i] += dy[r * f + i] * kernels::layer_norm_xhat(
                                               x[r * f + i], stats[static_cast<std::size_t>(r)]);
        });
      });
}

}  // namespace flaxpp::cpu
