// argmax, argmin, cumsum, argsort and permute_along_axis on the CPU: along each line of the
// axis (layout_plan.hpp's AxisLines); the passes take the inner lines side by side so that the
// reads stay contiguous, argsort one line at a time (a stable sort of its positions).
#include <algorithm>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_eval_impl.hpp"
#include "flaxpp/kernels/arg_reduce.hpp"
#include "flaxpp/kernels/sort_order.hpp"

namespace flaxpp::cpu {

// The index along the axis of the element `Better` picks first, per line.
template <class Better>
Array Families::arg_reduce(const ir::Primitive& prim, std::span<const Array> in,
                           const ir::Params& params, const AVal& out) {
  const Array& x = in[0];
  const backend_impl::AxisLines lines = backend_impl::axis_lines(x.shape().dims(), params);
  return visit_dtype<kNumeric>(prim, x.dtype(), [&]<class T>(TypeTag<T>) {
    const Output o(out);
    const T* xs = in_data<T>(x);
    std::int32_t* ys = o.data<std::int32_t>();
    std::vector<T> best(static_cast<std::size_t>(lines.inner));
    for (std::int64_t outer = 0; outer < lines.outer; ++outer) {
      const T* line = xs + outer * lines.extent * lines.inner;
      std::int32_t* index = ys + outer * lines.inner;
      for (std::int64_t i = 0; i < lines.inner; ++i) {
        best[static_cast<std::size_t>(i)] = line[i];
        index[i] = 0;
      }
      for (std::int64_t j = 1; j < lines.extent; ++j)
        for (std::int64_t i = 0; i < lines.inner; ++i) {
          const T v = line[j * lines.inner + i];
          T& b = best[static_cast<std::size_t>(i)];
          if (Better{}(v, b)) {
            b = v;
            index[i] = static_cast<std::int32_t>(j);
          }
        }
    }
    return o.array();
  });
}

FLAXPP_EVAL_INSTANTIATE_ARG_REDUCE;

Array Families::cumsum(const ir::Primitive& prim, std::span<const Array> in,
                       const ir::Params& params, const AVal& out) {
  const Array& x = in[0];
  const backend_impl::AxisLines lines = backend_impl::axis_lines(x.shape().dims(), params);
  const bool reverse = params.get<bool>("reverse");
  return visit_dtype<kNumeric>(prim, x.dtype(), [&]<class T>(TypeTag<T>) {
    const Output o(out);
    const T* xs = in_data<T>(x);
    T* ys = o.data<T>();
    const std::int64_t n = lines.inner;
    for (std::int64_t outer = 0; outer < lines.outer; ++outer) {
      const std::int64_t base = outer * lines.extent * n;
      for (std::int64_t step = 0; step < lines.extent; ++step) {
        const std::int64_t j = reverse ? lines.extent - 1 - step : step;
        const T* xj = xs + base + j * n;
        T* yj = ys + base + j * n;
        if (step == 0) {
          std::copy_n(xj, n, yj);
        } else {
          const T* prev = yj + (reverse ? n : -n);
          for (std::int64_t i = 0; i < n; ++i)
            yj[i] = prev[i] + xj[i];
        }
      }
    }
    return o.array();
  });
}

Array Families::argsort(const ir::Primitive& prim, std::span<const Array> in,
                        const ir::Params& params, const AVal& out) {
  const Array& x = in[0];
  const backend_impl::AxisLines lines = backend_impl::axis_lines(x.shape().dims(), params);
  const bool descending = params.get<bool>("descending"),
             signed_zeros = params.get<bool>("signed_zeros");
  return visit_dtype<kNumeric>(prim, x.dtype(), [&]<class T>(TypeTag<T>) {
    const Output o(out);
    const T* xs = in_data<T>(x);
    std::int32_t* ys = o.data<std::int32_t>();
    std::vector<T> line(static_cast<std::size_t>(lines.extent));
    std::vector<std::int32_t> order(line.size());
    for (std::int64_t outer = 0; outer < lines.outer; ++outer)
      for (std::int64_t i = 0; i < lines.inner; ++i) {
        const std::int64_t base = outer * lines.extent * lines.inner + i;
        for (std::size_t j = 0; j < line.size(); ++j)
          line[j] = xs[base + static_cast<std::int64_t>(j) * lines.inner];
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
          return kernels::sorts_before(line[static_cast<std::size_t>(a)],
                                       line[static_cast<std::size_t>(b)], descending, signed_zeros);
        });
        for (std::size_t j = 0; j < order.size(); ++j)
          ys[base + static_cast<std::int64_t>(j) * lines.inner] = order[j];
      }
    return o.array();
  });
}

Array Families::permute_along_axis(const ir::Primitive& prim, std::span<const Array> in,
                                   const ir::Params& params, const AVal& out) {
  const Array& x = in[0];
  const backend_impl::AxisLines lines = backend_impl::axis_lines(x.shape().dims(), params);
  return visit_dtype<kAll>(prim, x.dtype(), [&]<class T>(TypeTag<T>) {
    const Output o(out);
    const T* xs = in_data<T>(x);
    const std::int32_t* ps = in_data<std::int32_t>(in[1]);
    T* ys = o.data<T>();
    const std::int64_t n = lines.inner, last = lines.extent - 1;
    for (std::int64_t outer = 0; outer < lines.outer; ++outer) {
      const std::int64_t base = outer * lines.extent * n;
      for (std::int64_t j = 0; j < lines.extent; ++j)
        for (std::int64_t i = 0; i < n; ++i) {
          const std::int64_t at = base + j * n + i;
          ys[at] = xs[base + std::clamp<std::int64_t>(ps[at], 0, last) * n + i];
        }
    }
    return o.array();
  });
}

}  // namespace flaxpp::cpu
