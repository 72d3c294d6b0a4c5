// kernels/index_fault.hpp — an index outside its operand's rows, found by a GPU kernel (take,
// scatter_add). A kernel cannot throw: it clamps the index, as JAX does, and records the first
// bad one here, in host memory mapped into the device's address space; the backend reads the
// record at its next synchronisation with the host and raises flaxpp's error there
// (src/backend/cuda/cuda_index_faults.hpp). Plain C++, shared by the kernels and the host.
#ifndef FLAXPP_KERNELS_INDEX_FAULT_HPP
#define FLAXPP_KERNELS_INDEX_FAULT_HPP

#include <cstdint>

namespace flaxpp::kernels {

enum class IndexedOp : std::int32_t { take = 0, scatter_add = 1 };

struct IndexFault {
  std::int32_t seen;      // 0 until a kernel finds a bad index; the first one sets it to 1
  IndexedOp op;           // which primitive found it
  std::int32_t index;     // the bad index
  std::int32_t pad;
  std::int64_t position;  // its element in the indices
  std::int64_t rows;      // the operand's rows: every index must lie in [0, rows)
};

}  // namespace flaxpp::kernels

#endif  // FLAXPP_KERNELS_INDEX_FAULT_HPP
