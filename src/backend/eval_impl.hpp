// Private to the backends' primitive evaluation: result buffers on any device, the dtype
// families a primitive accepts, and dtype dispatch. Each backend's table maps a primitive to
// an EvalFn built from these.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/aval.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/dtype.hpp"
#include "flaxpp/ir/elementwise_program.hpp"
#include "flaxpp/ir/params.hpp"
#include "flaxpp/ir/primitive.hpp"
#include "flaxpp/kernels/arg_reduce.hpp"

namespace flaxpp::backend_impl {

// One primitive's evaluation: its inputs (on the backend's device), params and the aval of
// its single result. (EvalSig declares a backend's family functions of this signature.)
using EvalSig = Array(const ir::Primitive& prim, std::span<const Array> inputs,
                      const ir::Params& params, const AVal& out);
using EvalFn = EvalSig*;

// The primitives a backend evaluates with one function of its own, of the signature EvalSig
// and the primitive's name.
#define FLAXPP_EVAL_FAMILIES(X)                                                                  \
  X(select_n)                                                                                    \
  X(convert_element_type)                                                                        \
  X(reduce_sum)                                                                                  \
  X(reduce_max)                                                                                  \
  X(dot_general) X(dot_general_bias) X(layer_norm) X(layer_norm_dx) X(layer_norm_dscale) X(iota) \
      X(take) X(scatter_add) X(pad) X(concatenate) X(dynamic_slice) X(dynamic_update_slice)      \
          X(cumsum) X(argsort) X(permute_along_axis) X(conv_general_dilated)                     \
              X(select_and_scatter_add)
#define FLAXPP_EVAL_DECLARE_FAMILY(name) static backend_impl::EvalSig name;

// The members every backend's Families type declares beside its dtype families and name
// (eval_table.hpp's concept EvalFamilies says what each does); each backend defines them in
// its own files.
#define FLAXPP_EVAL_FAMILIES_MEMBERS                                                               \
  template <unsigned kAllowed, class Op>                                                           \
  static Array binary(const ir::Primitive& prim, std::span<const Array> in,                        \
                      const ir::Params& params, const AVal& out);                                  \
  template <unsigned kAllowed, class Op>                                                           \
  static Array map_unary(const ir::Primitive& prim, const Array& x, const AVal& out, Op op);       \
  template <class Better>                                                                          \
  static Array arg_reduce(const ir::Primitive& prim, std::span<const Array> in,                    \
                          const ir::Params& params, const AVal& out);                              \
  template <bool kMax>                                                                             \
  static Array reduce_window(const ir::Primitive& prim, std::span<const Array> in,                 \
                             const ir::Params& params, const AVal& out);                           \
  FLAXPP_EVAL_FAMILIES(FLAXPP_EVAL_DECLARE_FAMILY)                                                 \
  static backend_impl::EvalSig random_words;                                                       \
  static std::vector<Array> fused_elementwise(const ir::Primitive& prim,                           \
                                              std::span<const Array> in, const ir::Params& params, \
                                              std::span<const AVal> out);                          \
  static Array gather(const ir::Primitive& prim, const Array& x,                                   \
                      const backend_impl::StridedCopy& copy, const AVal& out)

// Each backend defines Families::arg_reduce in its own file and instantiates it there for the
// two choices (argmax, argmin) the table uses.
#define FLAXPP_EVAL_INSTANTIATE_ARG_REDUCE                                           \
  template Array Families::arg_reduce<kernels::ArgmaxBetter>(                        \
      const ir::Primitive&, std::span<const Array>, const ir::Params&, const AVal&); \
  template Array Families::arg_reduce<kernels::ArgminBetter>(                        \
      const ir::Primitive&, std::span<const Array>, const ir::Params&, const AVal&)

// Each backend defines Families::reduce_window in its own file and instantiates it there for
// the sum (false) and the max (true).
#define FLAXPP_EVAL_INSTANTIATE_REDUCE_WINDOW                                                 \
  template Array Families::reduce_window<false>(const ir::Primitive&, std::span<const Array>, \
                                                const ir::Params&, const AVal&);              \
  template Array Families::reduce_window<true>(const ir::Primitive&, std::span<const Array>,  \
                                               const ir::Params&, const AVal&)

// A new, uninitialised buffer for one result on `device`: write it through data<T>(), then
// wrap it.
class Output {
 public:
  Output(const AVal& aval, Device device)
      : aval_(aval),
        buffer_(backend(device).allocate(aval.shape.size() *
                                         static_cast<std::int64_t>(itemsize(aval.dtype)))) {}
  template <class T>
  T* data() const {
    return static_cast<T*>(buffer_->data());
  }
  Array array() const { return Array(buffer_, aval_.shape, aval_.dtype); }

 private:
  AVal aval_;
  std::shared_ptr<Buffer> buffer_;
};

// fused_elementwise's params: its program, and whether inputs nothing else holds may take
// results (donated_inputs).
struct FusedParams {
  const ir::ElementwiseProgram& program;
  bool donate;
};
inline FusedParams fused_params(const ir::Params& params) {
  return {*params.get<std::shared_ptr<const ir::ElementwiseProgram>>("program"),
          params.has("donate") && params.get<bool>("donate")};
}

// For each result of one fused_elementwise group (all of the group's aval), the index of the
// group input whose buffer it takes over, or -1 for a new buffer: with `donate`, the inputs no
// other Array shares (their owner gave them up) serve as ElementwiseProgram::donations says.
inline std::vector<int> donated_inputs(std::span<const Array> group_inputs,
                                       const ir::ElementwiseProgram& program, bool donate) {
  if (!donate) return std::vector<int>(program.outputs.size(), -1);
  std::vector<bool> free(group_inputs.size());
  for (std::size_t j = 0; j < free.size(); ++j)
    free[j] = group_inputs[j].buffer_unshared();
  return program.donations(free);
}

// The elements of a concrete array whose dtype has storage type T (std::uint8_t for bool).
// The pointer is in the memory of the array's device.
template <class T>
const T* in_data(const Array& a) {
  return static_cast<const T*>(a.buffer().data());
}

// Dtype families a primitive's implementation accepts.
inline constexpr unsigned kFloat = 1;  // f32, f64
inline constexpr unsigned kInt = 2;    // i32, u32
inline constexpr unsigned kBool = 4;
inline constexpr unsigned kHalf = 8;  // bf16, f16: storage types only the CUDA backend has
inline constexpr unsigned kNumeric = kFloat | kInt;
inline constexpr unsigned kAll = kFloat | kInt | kBool;

// ValueError: `prim` is not implemented for `dtype` on `device`'s backend.
[[noreturn]] void throw_unsupported_dtype(const ir::Primitive& prim, DType dtype, Device device);

// Calls f(TypeTag<Storage>{}) for `dtype` when it is in the families kAllowed (bf16 and f16
// excepted: backends that store them dispatch those first), else throws ValueError naming
// the primitive, dtype and device. Only allowed types are instantiated; f returns R.
template <unsigned kAllowed, class R = Array, class F>
R visit_dtype(const ir::Primitive& prim, DType dtype, Device device, F&& f) {
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
  throw_unsupported_dtype(prim, dtype, device);
}

}  // namespace flaxpp::backend_impl
