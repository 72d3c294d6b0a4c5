// Private to the CPU backend's primitive evaluation: the shared helpers (eval_impl.hpp,
// layout_plan.hpp) on the CPU, and the entry points of the families in their own files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "backend/eval_impl.hpp"
#include "backend/layout_plan.hpp"
#include "flaxpp/core/array.hpp"
#include "flaxpp/core/aval.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/dtype.hpp"
#include "flaxpp/ir/params.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp::cpu {

using backend_impl::in_data;
using backend_impl::kAll;
using backend_impl::kFloat;
using backend_impl::kNumeric;

// A new, uninitialised CPU buffer for one result.
class Output : public backend_impl::Output {
 public:
  explicit Output(const AVal& aval) : backend_impl::Output(aval, Device::cpu()) {}
};

[[noreturn]] inline void throw_unsupported_dtype(const ir::Primitive& prim, DType dtype) {
  backend_impl::throw_unsupported_dtype(prim, dtype, Device::cpu());
}

// backend_impl::visit_dtype on the CPU.
template <unsigned kAllowed, class R = Array, class F>
R visit_dtype(const ir::Primitive& prim, DType dtype, F&& f) {
  return backend_impl::visit_dtype<kAllowed, R>(prim, dtype, Device::cpu(), std::forward<F>(f));
}

// Row-major C (m, n) = A (m, k) · B (k, n), contiguous, on the engine of float32 products
// (cpu_gemm_settings.hpp; float64 on the BLAS): the products of cpu_dot_general.cpp.
template <class T>
void matmul(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, const T* b, T* c);

// Writes `copy`'s result (row-major) from `in`, for elements of `itemsize` bytes (1, 4 or 8).
void gather_strided(const void* in, const backend_impl::StridedCopy& copy, std::size_t itemsize,
                    void* out);

// The CPU's evaluation families (eval_table.hpp): the elementwise ones in cpu_eval.cpp,
// gather in cpu_layout.cpp, reductions in cpu_reduce.cpp, dot_general and dot_general_bias in
// cpu_dot_general.cpp, LayerNorm in cpu_layer_norm.cpp, the index primitives in
// cpu_indexing.cpp, pad and concatenate in cpu_slicing.cpp, argmax, argmin and cumsum in
// cpu_along_axis.cpp, convolutions and windows in cpu_window.cpp.
struct Families {
  static constexpr unsigned kNum = kNumeric, kFp = kFloat, kAny = kAll;
  static constexpr const char* kName = "CPU";
  FLAXPP_EVAL_FAMILIES_MEMBERS;
};

}  // namespace flaxpp::cpu
