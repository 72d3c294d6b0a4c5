// The backends' shared error for a dtype a primitive's implementation does not take.
#include "backend/eval_impl.hpp"
#include "flaxpp/core/error.hpp"

namespace flaxpp {

void backend_impl::throw_unsupported_dtype(const ir::Primitive& prim, DType dtype, Device device) {
  throw ValueError(detail::str(prim.name(), ": the ", device,
                               " backend does not implement it for dtype ", dtype_name(dtype),
                               "; convert the operands with convert_element_type first"));
}

}  // namespace flaxpp
