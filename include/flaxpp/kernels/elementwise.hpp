// flaxpp/kernels/elementwise.hpp — the math of every elementwise lax primitive as tiny functors
// on the element type, shared by the CPU loops and CUDA kernels; numerics follow XLA's CPU
// backend.
#ifndef FLAXPP_KERNELS_ELEMENTWISE_HPP
#define FLAXPP_KERNELS_ELEMENTWISE_HPP

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "hd.hpp"
#include "special_math.hpp"

namespace flaxpp::kernels {

// The value range of the integer element types (std::numeric_limits is not device code).
template <class T>
struct IntRange;
template <>
struct IntRange<std::int32_t> {
  static constexpr std::int32_t lo = INT32_MIN, hi = INT32_MAX;
};
template <>
struct IntRange<std::uint32_t> {
  static constexpr std::uint32_t lo = 0, hi = UINT32_MAX;
};

namespace detail {
// Integer add/sub/mul/neg wrap around (two's complement) as in XLA; computing in the unsigned
// type of the same width keeps signed overflow defined. Floats pass through.
template <class T, bool = std::is_integral_v<T>>
struct Wrapping {
  using type = T;
};
template <class T>
struct Wrapping<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <class T>
using wrapping_t = typename Wrapping<T>::type;
}  // namespace detail

// ---- binary arithmetic: (T, T) -> T -------------------------------------------------------

struct Add {
  template <class T>
  FLAXPP_HD T operator()(T x, T y) const {
    using U = detail::wrapping_t<T>;
    return static_cast<T>(static_cast<U>(x) + static_cast<U>(y));
  }
};

struct Sub {
  template <class T>
  FLAXPP_HD T operator()(T x, T y) const {
    using U = detail::wrapping_t<T>;
    return static_cast<T>(static_cast<U>(x) - static_cast<U>(y));
  }
};

struct Mul {
  template <class T>
  FLAXPP_HD T operator()(T x, T y) const {
    using U = detail::wrapping_t<T>;
    return static_cast<T>(static_cast<U>(x) * static_cast<U>(y));
  }
};

// Integer division truncates toward zero. The cases C++ leaves undefined get XLA's values
// (its elemental IR emitter selects them): x / 0 is -1 (all bits set, so UINT32_MAX for
// u32), and INT32_MIN / -1 is INT32_MIN.
struct Div {
  template <class T>
  FLAXPP_HD T operator()(T x, T y) const {
    if constexpr (std::is_floating_point_v<T>) {
      return x / y;
    } else {
      if (y == 0) return static_cast<T>(~T(0));
      if constexpr (std::is_signed_v<T>) {
        if (x == IntRange<T>::lo && y == T(-1)) return x;
      }
      return static_cast<T>(x / y);
    }
  }
};

// max/min are IEEE 754-2019 maximum/minimum, as XLA's CPU backend computes them: NaN if
// either operand is NaN (C's fmax would drop it), and -0 < +0, so max(-0, +0) is +0 in
// either order (relu(-0.0) is +0.0). `v != v` is the NaN test that also compiles for
// integers, where it is always false.
// Written as selects, without branches, so that loops of them vectorise.
struct Max {
  template <class T>
  FLAXPP_HD T operator()(T x, T y) const {
    if constexpr (std::is_floating_point_v<T>) {
      const T larger = x > y ? x : y;
      const T equal = std::signbit(x) ? y : x;  // equal, or zeros of either sign: +0
      const T r = x == y ? equal : larger;
      return x != x ? x : (y != y ? y : r);
    }
    return x > y ? x : y;
  }
};

struct Min {
  template <class T>
  FLAXPP_HD T operator()(T x, T y) const {
    if constexpr (std::is_floating_point_v<T>) {
      const T smaller = x < y ? x : y;
      const T equal = std::signbit(x) ? x : y;  // -0
      const T r = x == y ? equal : smaller;
      return x != x ? x : (y != y ? y : r);
    }
    return x < y ? x : y;
  }
};

// ---- comparisons: (T, T) -> bool (IEEE: every comparison with NaN is false except ne) ------

struct Eq {
  template <class T>
  FLAXPP_HD bool operator()(T x, T y) const {
    return x == y;
  }
};
struct Ne {
  template <class T>
  FLAXPP_HD bool operator()(T x, T y) const {
    return x != y;
  }
};
struct Lt {
  template <class T>
  FLAXPP_HD bool operator()(T x, T y) const {
    return x < y;
  }
};
struct Le {
  template <class T>
  FLAXPP_HD bool operator()(T x, T y) const {
    return x <= y;
  }
};
struct Gt {
  template <class T>
  FLAXPP_HD bool operator()(T x, T y) const {
    return x > y;
  }
};
struct Ge {
  template <class T>
  FLAXPP_HD bool operator()(T x, T y) const {
    return x >= y;
  }
};

// ---- unary on any numeric type ------------------------------------------------------------

// Integers wrap: neg(INT32_MIN) is INT32_MIN, neg(1u) is UINT32_MAX.
struct Neg {
  template <class T>
  FLAXPP_HD T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      return -x;
    } else {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(U(0) - static_cast<U>(x));
    }
  }
};

// fabs for floats (so abs(-0.0) is +0.0); abs(INT32_MIN) wraps to INT32_MIN as in XLA.
struct Abs {
  template <class T>
  FLAXPP_HD T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::fabs(x);
    } else if constexpr (std::is_signed_v<T>) {
      return x < 0 ? Neg{}(x) : x;
    } else {
      return x;
    }
  }
};

// -1, 0 or 1; zeros keep their sign (sign(-0.0) is -0.0) and NaN gives NaN, as in XLA.
struct Sign {
  template <class T>
  FLAXPP_HD T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) {
      return x > 0 ? T(1) : x;
    } else {
      return x > 0 ? T(1) : (x < 0 ? T(-1) : x);
    }
  }
};

// x**y by square-and-multiply from the lowest bit of |y|, then 1/acc for y < 0 — the same
// multiplications in the same order as JAX's lowering (jax/_src/lax/lax.py _integer_pow),
// so float results round identically. Starting acc at 1 is exact (1*v == v, NaN included).
// y == 0 gives 1 for every x, NaN and 0 too. Integers use wrapping mul and XLA's division.
struct IntegerPow {
  std::int64_t y;
  template <class T>
  FLAXPP_HD T operator()(T x) const {
    std::uint64_t n =
        y < 0 ? std::uint64_t(0) - static_cast<std::uint64_t>(y) : static_cast<std::uint64_t>(y);
    T acc = T(1);
    while (n > 0) {
      if (n & 1u) acc = Mul{}(acc, x);
      n >>= 1;
      if (n > 0) x = Mul{}(x, x);
    }
    return y < 0 ? Div{}(T(1), acc) : acc;
  }
};

// ---- unary on floating types (float and double) -------------------------------------------
// The f32 results can differ from XLA's in the last bit or two where XLA's CPU backend uses
// its own approximations (exp, log); erf and tanh use XLA's exact f32 formulas.

struct Exp {
  template <class T>
  FLAXPP_HD T operator()(T x) const {
    return std::exp(x);
  }
};
struct Log {
  template <class T>
  FLAXPP_HD T operator()(T x) const {
    return std::log(x);
  }
};
// Accurate near 0, where log(1 + x) would lose x's low bits.
struct Log1p {
  template <class T>
  FLAXPP_HD T operator()(T x) const {
    return std::log1p(x);
  }
};
// f32: XLA's CPU fast tanh (special_math.hpp), matching jnp.tanh bit for bit (jax.nn.gelu's
// tanh form depends on it). f64: the C library's tanh.
struct Tanh {
  template <class T>
  FLAXPP_HD T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) {
      return xla_tanh_f32(x);
    } else {
      return std::tanh(x);
    }
  }
};
// 1 / (1 + exp(-x)): the form XLA's LogisticExpander emits on CPU. It saturates cleanly:
// exp(-x) overflows to inf for very negative x, giving exactly 0, and underflows to 0 for
// large x, giving exactly 1; no NaN from inf/inf.
struct Logistic {
  template <class T>
  FLAXPP_HD T operator()(T x) const {
    return T(1) / (T(1) + std::exp(-x));
  }
};
struct Sqrt {
  template <class T>
  FLAXPP_HD T operator()(T x) const {
    return std::sqrt(x);
  }
};
// 1 / sqrt(x) rounded twice, as XLA's CPU backend computes it (no hardware approximation).
struct Rsqrt {
  template <class T>
  FLAXPP_HD T operator()(T x) const {
    return T(1) / std::sqrt(x);
  }
};
// f32: XLA's rational approximation (special_math.hpp), matching JAX bit for bit, which
// random::truncated_normal depends on. f64: the C library's erf.
struct Erf {
  template <class T>
  FLAXPP_HD T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) {
      return xla_erf_f32(x);
    } else {
      return std::erf(x);
    }
  }
};

// x**y for floating x and y (lax.pow): the C library's pow, which XLA's CPU backend calls
// (jnp.power's float32 results equal powf's except where XLA flushes a subnormal result to
// zero). CUDA's pow is within 2 ulp of it.
struct Pow {
  template <class T>
  FLAXPP_HD T operator()(T x, T y) const {
    return std::pow(x, y);
  }
};
// The C library's cos and sin, which XLA's CPU backend calls (jnp.cos and jnp.sin of float32
// equal cosf and sinf bit for bit); CUDA's are within 2 ulp.
struct Cos {
  template <class T>
  FLAXPP_HD T operator()(T x) const {
    return std::cos(x);
  }
};
struct Sin {
  template <class T>
  FLAXPP_HD T operator()(T x) const {
    return std::sin(x);
  }
};

// ---- the elementwise primitives ----------------------------------------------------------

// Every elementwise lax primitive whose math is one functor above, as
// X(name, Functor, dtypes, unfused) (comparisons: X(name, Functor, unfused)). These lists are
// the only ones: flaxpp/ir/lax.hpp declares name_p and name() from them, src/ir/primitives/
// elementwise.cpp defines them (with the VJP rule it writes as name_vjp), every backend's table
// applies the functor to the dtypes named (Num: numeric, Fp: floating; comparisons take every
// dtype and give bool), program.hpp makes each an operation of fused programs (its arity from
// the list it is in), elementwise_program.hpp dispatches those operations to the functors, and
// flaxpp/ir/elementwise_program.hpp gives each a function on program values. `unfused` is ""
// where jit's fusion pass may put the primitive into a fused program, else the reason it may
// not (the pass then leaves it to its own kernel): every primitive here fuses, since a program
// applies the same functor to the same element type, so its results keep their bits. A new
// elementwise primitive is a functor and a line here, its name_vjp, and a test.
// integer_pow (a param), select_n and convert_element_type are written out.
// clang-format off
#define FLAXPP_ELEMENTWISE_BINARY(X) \
  X(add, Add, Num, "") X(sub, Sub, Num, "") X(mul, Mul, Num, "") X(div, Div, Num, "") \
  X(max, Max, Num, "") X(min, Min, Num, "") X(pow, Pow, Fp, "")
#define FLAXPP_ELEMENTWISE_COMPARISONS(X) \
  X(eq, Eq, "") X(ne, Ne, "") X(lt, Lt, "") X(le, Le, "") X(gt, Gt, "") X(ge, Ge, "")
#define FLAXPP_ELEMENTWISE_UNARY(X) \
  X(neg, Neg, Num, "") X(abs, Abs, Num, "") X(sign, Sign, Num, "") X(exp, Exp, Fp, "") \
  X(log, Log, Fp, "") X(log1p, Log1p, Fp, "") X(tanh, Tanh, Fp, "") \
  X(logistic, Logistic, Fp, "") X(sqrt, Sqrt, Fp, "") X(rsqrt, Rsqrt, Fp, "") \
  X(erf, Erf, Fp, "") X(cos, Cos, Fp, "") X(sin, Sin, Fp, "")
// clang-format on

// ---- conversion -------------------------------------------------------------------------

// convert_element_type to `To` (bool, float, double, int32_t or uint32_t). To bool: x != 0
// (NaN is true). Float to integer behaves like LLVM's fptosi.sat/fptoui.sat, which XLA
// emits: truncate toward zero, saturate at the integer range, NaN becomes 0. The other
// conversions are C++'s (integers wrap modulo 2^32; f64 -> f32 rounds to nearest).
template <class To>
struct Convert {
  template <class From>
  FLAXPP_HD To operator()(From x) const {
    if constexpr (std::is_same_v<To, bool>) {
      return x != From(0);
    } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
      if (x != x) return To(0);
      // From(hi) may round up (2^31 for int32 in float); every value below it truncates to
      // something in range.
      if (x <= From(IntRange<To>::lo)) return IntRange<To>::lo;
      if (x >= From(IntRange<To>::hi)) return IntRange<To>::hi;
      return static_cast<To>(x);
    } else {
      return static_cast<To>(x);
    }
  }
};

// ---- reductions ---------------------------------------------------------------------------

// reduce_max's starting value, its result over an empty axis: -inf for floats, the lowest
// value for integers (XLA's init values for jnp.max).
template <class T>
FLAXPP_HD T max_identity() {
  if constexpr (std::is_floating_point_v<T>) {
    return -static_cast<T>(INFINITY);
  } else {
    return IntRange<T>::lo;
  }
}

}  // namespace flaxpp::kernels

#endif  // FLAXPP_KERNELS_ELEMENTWISE_HPP
