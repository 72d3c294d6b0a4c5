// CPU evaluation of the lax primitives: the elementwise, select_n and convert families (the
// math itself is flaxpp/kernels/elementwise.hpp's), and eval() through the shared table. The
// unary and binary loops share their elements among the CPU's threads (cpu_parallel.hpp).
#include "backend/cpu/cpu_eval.hpp"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "backend/cpu/cpu_eval_impl.hpp"
#include "backend/cpu/cpu_parallel.hpp"
#include "backend/cpu/cpu_unary_loop.hpp"
#include "backend/eval_table.hpp"
#include "flaxpp/core/error.hpp"
#include "flaxpp/kernels/elementwise.hpp"

namespace flaxpp::cpu {

namespace {

// The storage type of a functor's result: comparisons return bool, stored as one byte.
template <class R>
using storage_t = std::conditional_t<std::is_same_v<R, bool>, std::uint8_t, R>;

// out[i] = op(x[i], y[i]) over n elements, where a 0-d operand is read once and broadcast
// (when both are 0-d, n is 1). Three plain loops so that each one vectorises.
template <class Op, class T, class S>
void binary_loop(Op op, const T* x, bool x_scalar, const T* y, bool y_scalar, S* out,
                 std::int64_t n) {
  if (x_scalar) {
    const T xv = x[0];
    for (std::int64_t i = 0; i < n; ++i)
      out[i] = static_cast<S>(op(xv, y[i]));
  } else if (y_scalar) {
    const T yv = y[0];
    for (std::int64_t i = 0; i < n; ++i)
      out[i] = static_cast<S>(op(x[i], yv));
  } else {
    for (std::int64_t i = 0; i < n; ++i)
      out[i] = static_cast<S>(op(x[i], y[i]));
  }
}

}  // namespace

template <unsigned kAllowed, class Op>
Array Families::binary(const ir::Primitive& prim, std::span<const Array> in,
                       const ir::Params& /*params*/, const AVal& out) {
  const Array& x = in[0];
  const Array& y = in[1];
  return visit_dtype<kAllowed>(prim, x.dtype(), [&]<class T>(TypeTag<T>) {
    using S = storage_t<decltype(Op{}(T{}, T{}))>;
    const Output o(out);
    const bool x_scalar = x.rank() == 0, y_scalar = y.rank() == 0;
    parallel_rows(out.shape.size(), 1, [&](std::int64_t begin, std::int64_t end) {
      binary_loop(Op{}, in_data<T>(x) + (x_scalar ? 0 : begin), x_scalar,
                  in_data<T>(y) + (y_scalar ? 0 : begin), y_scalar, o.data<S>() + begin,
                  end - begin);
    });
    return o.array();
  });
}

// out[i] = op(x[i]); `op` may carry parameters (integer_pow's y).
template <unsigned kAllowed, class Op>
Array Families::map_unary(const ir::Primitive& prim, const Array& x, const AVal& out, Op op) {
  return visit_dtype<kAllowed>(prim, x.dtype(), [&]<class T>(TypeTag<T>) {
    const Output o(out);
    parallel_rows(out.shape.size(), 1, [&](std::int64_t begin, std::int64_t end) {
      unary_loop(op, in_data<T>(x) + begin, o.data<T>() + begin, end - begin);
    });
    return o.array();
  });
}

namespace {

// Index of the case `which` picks. Out-of-range int32 values are clamped to the first/last
// case, as XLA's lowering of select_n (a tree of `which < k` selects) resolves them.
std::size_t case_index(std::int64_t which, std::size_t num_cases) {
  return static_cast<std::size_t>(std::clamp<std::int64_t>(which, 0, std::int64_t(num_cases) - 1));
}

}  // namespace

// select_n(which, case_0, ..., case_{n-1}).
Array Families::select_n(const ir::Primitive& prim, std::span<const Array> in,
                         const ir::Params& /*params*/, const AVal& out) {
  const Array& which = in[0];
  const std::span<const Array> cases = in.subspan(1);
  if (which.dtype() != DType::bool_ && which.dtype() != DType::i32)
    throw_unsupported_dtype(prim, which.dtype());
  auto which_at = [&](std::int64_t i) -> std::int64_t {
    return which.dtype() == DType::bool_ ? in_data<std::uint8_t>(which)[i] != 0
                                         : in_data<std::int32_t>(which)[i];
  };
  // One case, or one choice for every element: the chosen case is the result.
  if (cases.size() == 1) return cases[0];
  if (which.rank() == 0) return cases[case_index(which_at(0), cases.size())];

  return visit_dtype<kAll>(prim, out.dtype, [&]<class T>(TypeTag<T>) {
    const Output o(out);
    T* ys = o.data<T>();
    const std::int64_t n = out.shape.size();
    if (which.dtype() == DType::bool_ && cases.size() == 2) {
      const std::uint8_t* w = in_data<std::uint8_t>(which);
      const T* c0 = in_data<T>(cases[0]);
      const T* c1 = in_data<T>(cases[1]);
      for (std::int64_t i = 0; i < n; ++i)
        ys[i] = w[i] ? c1[i] : c0[i];
    } else {
      std::vector<const T*> cs;
      for (const Array& c : cases)
        cs.push_back(in_data<T>(c));
      for (std::int64_t i = 0; i < n; ++i)
        ys[i] = cs[case_index(which_at(i), cs.size())][i];
    }
    return o.array();
  });
}

namespace {

// A conversion from or to bfloat16 or float16, which the CPU stores (arrays of a GPU's 16-bit
// computation brought to the host) but does not compute in: through each element's exact
// double, rounded to nearest-even as core/dtype.hpp's conversions round; the other side is
// converted as between any two of the CPU's dtypes (kernels::Convert).
Array convert_half(const ir::Primitive& prim, const Array& x, const AVal& out) {
  const std::int64_t n = out.shape.size();
  std::vector<double> v(static_cast<std::size_t>(n));
  if (is_half(x.dtype())) {
    const auto* bits = in_data<std::uint16_t>(x);
    for (std::int64_t i = 0; i < n; ++i)
      v[static_cast<std::size_t>(i)] = x.dtype() == DType::bf16 ? bfloat16_bits_to_double(bits[i])
                                                                : float16_bits_to_double(bits[i]);
  } else {
    visit_dtype<kAll>(prim, x.dtype(), [&]<class From>(TypeTag<From>) {
      const From* xs = in_data<From>(x);
      for (std::int64_t i = 0; i < n; ++i)
        v[static_cast<std::size_t>(i)] = static_cast<double>(xs[i]);
      return Array();
    });
  }
  const Output o(out);
  if (is_half(out.dtype)) {
    auto* ys = o.data<std::uint16_t>();
    for (std::int64_t i = 0; i < n; ++i)
      ys[i] = out.dtype == DType::bf16 ? round_to_bfloat16_bits(v[static_cast<std::size_t>(i)])
                                       : round_to_float16_bits(v[static_cast<std::size_t>(i)]);
    return o.array();
  }
  return visit_dtype<kAll>(prim, out.dtype, [&]<class To>(TypeTag<To>) {
    using ToValue = std::conditional_t<std::is_same_v<To, std::uint8_t>, bool, To>;
    const kernels::Convert<ToValue> convert;
    To* ys = o.data<To>();
    for (std::int64_t i = 0; i < n; ++i)
      ys[i] = static_cast<To>(convert(v[static_cast<std::size_t>(i)]));
    return o.array();
  });
}

}  // namespace

Array Families::convert_element_type(const ir::Primitive& prim, std::span<const Array> in,
                                     const ir::Params& /*params*/, const AVal& out) {
  const Array& x = in[0];
  if (x.dtype() == out.dtype) return x;
  if (is_half(x.dtype()) || is_half(out.dtype)) return convert_half(prim, x, out);
  return visit_dtype<kAll>(prim, x.dtype(), [&]<class From>(TypeTag<From>) {
    return visit_dtype<kAll>(prim, out.dtype, [&]<class To>(TypeTag<To>) {
      // Bool is stored as a byte but converts with bool semantics (x != 0).
      using ToValue = std::conditional_t<std::is_same_v<To, std::uint8_t>, bool, To>;
      const kernels::Convert<ToValue> convert;
      const Output o(out);
      const From* xs = in_data<From>(x);
      To* ys = o.data<To>();
      const std::int64_t n = out.shape.size();
      for (std::int64_t i = 0; i < n; ++i)
        ys[i] = static_cast<To>(convert(xs[i]));
      return o.array();
    });
  });
}

std::vector<Array> eval(const ir::Primitive& prim, std::span<const Array> inputs,
                        const ir::Params& params, std::span<const AVal> out_avals) {
  return backend_impl::eval_with<Families>(prim, inputs, params, out_avals);
}

}  // namespace flaxpp::cpu
