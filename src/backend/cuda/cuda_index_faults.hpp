// Private to the CUDA backend: the record in which take and scatter_add kernels note an index
// outside their operand's rows (kernels/index_fault.hpp), and its reading at the backend's
// synchronisations with the host. flaxpp refuses such an index where JAX clamps it; on the GPU
// the refusal cannot come from the kernel, nor from reading the indices back first (that would
// keep every Embed model out of CUDA graphs), so it comes at the next synchronisation: the
// step that computed the index fails there, with flaxpp's usual message.
#pragma once

#include <mutex>

#include "kernels/index_fault.hpp"

namespace flaxpp::cuda {

class IndexFaults {
 public:
  // Pinned host memory mapped into the devices' address space (no managed memory).
  IndexFaults();
  ~IndexFaults();
  IndexFaults(const IndexFaults&) = delete;
  IndexFaults& operator=(const IndexFaults&) = delete;

  // The record's address for the kernels.
  kernels::IndexFault* device() const { return device_; }
  // After the backend's stream was synchronised: throws ValueError describing the first bad
  // index a kernel recorded since the last call, and clears the record; otherwise nothing.
  void raise_pending() const;

 private:
  mutable std::mutex mutex_;  // threads synchronising at once: one reads and clears
  kernels::IndexFault* host_ = nullptr;
  kernels::IndexFault* device_ = nullptr;
};

}  // namespace flaxpp::cuda
