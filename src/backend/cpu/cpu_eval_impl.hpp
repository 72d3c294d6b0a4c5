// Private to the CPU backend's primitive evaluation: result buffers, dtype dispatch, and the
// entry points of the primitive families that live in their own files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/aval.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/dtype.hpp"
#include "flaxpp/ir/params.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp::cpu {

// One primitive's evaluation: its inputs, params and the aval of its single result.
using EvalFn = Array (*)(const ir::Primitive& prim, std::span<const Array> inputs,
                         const ir::Params& params, const AVal& out);

// A new, uninitialised CPU buffer for one result: write it through data<T>(), then wrap it.
class Output {
 public:
  explicit Output(const AVal& aval)
      : aval_(aval),
        buffer_(
            backend(Device::cpu())
                .allocate(aval.shape.size() * static_cast<std::int64_t>(itemsize(aval.dtype)))) {}
  template <class T>
  T* data() const {
    return static_cast<T*>(buffer_->data());
  }
  Array array() const { return Array(buffer_, aval_.shape, aval_.dtype); }

 private:
  AVal aval_;
  std::shared_ptr<Buffer> buffer_;
};

// The elements of a concrete CPU array whose dtype has storage type T (std::uint8_t for bool).
template <class T>
const T* in_data(const Array& a) {
  return static_cast<const T*>(a.buffer().data());
}

// Dtype families a primitive's CPU implementation accepts.
inline constexpr unsigned kFloat = 1;  // f32, f64
inline constexpr unsigned kInt = 2;    // i32, u32
inline constexpr unsigned kBool = 4;
inline constexpr unsigned kNumeric = kFloat | kInt;
inline constexpr unsigned kAll = kFloat | kInt | kBool;

[[noreturn]] void throw_unsupported_dtype(const ir::Primitive& prim, DType dtype);

// Calls f(TypeTag<Storage>{}) for `dtype` when it is in the families kAllowed, else throws
// ValueError naming the primitive and dtype. Only allowed types are instantiated.
template <unsigned kAllowed, class F>
Array visit_dtype(const ir::Primitive& prim, DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32:
      if constexpr ((kAllowed & kFloat) != 0) return f(TypeTag<float>{});
      break;
    case DType::f64:
      if constexpr ((kAllowed & kFloat) != 0) return f(TypeTag<double>{});
      break;
    case DType::i32:
      if constexpr ((kAllowed & kInt) != 0) return f(TypeTag<std::int32_t>{});
      break;
    case DType::u32:
      if constexpr ((kAllowed & kInt) != 0) return f(TypeTag<std::uint32_t>{});
      break;
    case DType::bool_:
      if constexpr ((kAllowed & kBool) != 0) return f(TypeTag<std::uint8_t>{});
      break;
    case DType::bf16:
    case DType::f16:
      break;
  }
  throw_unsupported_dtype(prim, dtype);
}

// Row-major strides, in elements, of an array of `dims`.
std::vector<std::int64_t> row_major_strides(std::span<const std::int64_t> dims);

// Writes the row-major array of `out_dims` whose element (i_0, ..., i_r) is
// in[i_0 * in_strides[0] + ... + i_r * in_strides[r]], for elements of `itemsize` bytes (1, 4
// or 8). Broadcasting (stride 0) and any axis permutation are special cases.
void gather_strided(const void* in, std::span<const std::int64_t> out_dims,
                    std::span<const std::int64_t> in_strides, std::size_t itemsize, void* out);

// Families with their own files.
Array eval_broadcast_in_dim(const ir::Primitive& prim, std::span<const Array> inputs,
                            const ir::Params& params, const AVal& out);
Array eval_reshape(const ir::Primitive& prim, std::span<const Array> inputs,
                   const ir::Params& params, const AVal& out);
Array eval_transpose(const ir::Primitive& prim, std::span<const Array> inputs,
                     const ir::Params& params, const AVal& out);
Array eval_reduce_sum(const ir::Primitive& prim, std::span<const Array> inputs,
                      const ir::Params& params, const AVal& out);
Array eval_reduce_max(const ir::Primitive& prim, std::span<const Array> inputs,
                      const ir::Params& params, const AVal& out);
Array eval_dot_general(const ir::Primitive& prim, std::span<const Array> inputs,
                       const ir::Params& params, const AVal& out);

}  // namespace flaxpp::cpu
