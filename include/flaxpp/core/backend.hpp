// flaxpp/core/backend.hpp — the interface every device backend implements: allocation with
// live/peak byte accounting per memory kind, and copies. Primitive execution joins this
// interface with the ir layer. Public methods validate and count, then call the virtual
// *_impl of the backend (which only moves bytes).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "flaxpp/core/device.hpp"

namespace flaxpp {

// Where an allocation lives. `pinned_host` is the destination of offloaded residuals; on the
// CPU backend it is ordinary host memory, counted apart so offload stays visible.
enum class MemoryKind : std::uint8_t { device, pinned_host };
inline constexpr int kNumMemoryKinds = 2;
std::string_view memory_kind_name(MemoryKind kind);  // "device", "pinned_host" (JAX's spelling)
// Parses JAX's memory-kind strings; throws ValueError naming the accepted ones.
MemoryKind memory_kind_from_name(std::string_view name);

struct MemoryStats {
  std::int64_t live_bytes = 0;         // bytes of buffers alive now
  std::int64_t peak_bytes = 0;         // high-water mark of live_bytes since the last reset
  std::int64_t live_buffers = 0;       // buffers alive now
  std::int64_t total_allocations = 0;  // allocations since the backend started
};

class Backend;

// What a backend allocated. The serial number is unique over the backend's life (addresses
// are reused, serials are not), so a backend can tell apart two buffers that had one address.
struct Allocation {
  void* data = nullptr;
  std::int64_t bytes = 0;
  MemoryKind kind = MemoryKind::device;
  std::uint64_t serial = 0;
};

// One allocation on one backend. Not copyable; shared through std::shared_ptr, and handed
// back to its backend (and uncounted) when the last owner drops it.
class Buffer {
 public:
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  void* data() const { return allocation_.data; }
  // True once the allocation went to another Buffer (Backend::take): jit's donate_argnums.
  bool donated() const { return donated_; }
  // True for a view into another buffer's memory (Backend::view): it owns no allocation, keeps
  // its parent alive, and is never written (no primitive takes it over).
  bool is_view() const { return parent_ != nullptr && !slot_; }
  // True for a slot of an arena (ArenaPlacement): a range of the arena's memory that holds one
  // value of a planned run, written like a buffer of its own; it keeps the arena alive and is
  // not counted (the arena is).
  bool is_slot() const { return slot_; }
  std::int64_t bytes() const { return allocation_.bytes; }
  MemoryKind memory_kind() const { return allocation_.kind; }
  std::uint64_t serial() const { return allocation_.serial; }
  Device device() const;
  Backend& backend() const { return *backend_; }

 private:
  friend class Backend;
  Buffer(Backend* backend, const Allocation& allocation,
         std::shared_ptr<const Buffer> parent = nullptr, bool slot = false)
      : backend_(backend), allocation_(allocation), parent_(std::move(parent)), slot_(slot) {}

  Backend* backend_;
  Allocation allocation_;
  std::shared_ptr<const Buffer> parent_;  // a view's or slot's: the buffer whose memory it uses
  bool slot_ = false;
  mutable bool donated_ = false;  // set by Backend::take; the allocation is no longer ours
};

// A recording of the device work that some host code queued (a CUDA graph): launch() runs the
// same kernels on the same buffers again without running that host code.
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  // Queues one run, asynchronously like the recorded work; the buffers the recording reads must
  // hold their new inputs by then, and what it writes is ready for work queued after it.
  virtual void launch() = 0;
};

// A planned run's placement of one equation's results (the jitted step's buffer assignment):
// while one is active on a thread, each allocate() of device memory on its backend takes the
// first unused slot of exactly its bytes, in the order the slots were given (the results'
// order, in which kernels allocate them): the arena's memory at the slot's offset, or, for a
// slot with a negative offset (a result the plan keeps apart), new memory as usual. Other
// allocations go to the backend as usual. Scopes nest: the innermost one is active. Not
// copyable; ends with its scope.
class ArenaPlacement {
 public:
  struct Slot {
    std::int64_t offset = 0;  // in the arena (or `in`); negative: new memory
    std::int64_t bytes = 0;
    // A buffer other than the arena that the slot is in (a loop's stacked results, whose row
    // the equation writes in place); null: the arena.
    std::shared_ptr<const Buffer> in = nullptr;
  };
  ArenaPlacement(Backend& backend, std::shared_ptr<const Buffer> arena, std::vector<Slot> slots);
  ArenaPlacement(const ArenaPlacement&) = delete;
  ArenaPlacement& operator=(const ArenaPlacement&) = delete;
  ~ArenaPlacement();

 private:
  friend class Backend;
  // The slot an allocation of `bytes` on `backend` takes, or nullptr for new memory.
  std::shared_ptr<Buffer> take(Backend& backend, std::int64_t bytes);

  Backend* backend_ = nullptr;
  std::shared_ptr<const Buffer> arena_;
  std::vector<Slot> slots_;
  std::vector<bool> used_;
  ArenaPlacement* outer_;
};

class Backend {
 public:
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  Device device() const { return device_; }

  // A new uninitialised buffer of `bytes` (0 allowed), or a slot of the active ArenaPlacement.
  // Throws OutOfMemoryError naming the request and the live/peak bytes when the backend cannot
  // provide it.
  std::shared_ptr<Buffer> allocate(std::int64_t bytes, MemoryKind kind = MemoryKind::device);

  // A new Buffer owning `donor`'s allocation (same address and serial), leaving `donor`
  // donated: every Array still holding it fails with a clear error when it is read (what
  // jax.jit's donate_argnums does to the caller's arrays). ValueError if already donated.
  std::shared_ptr<Buffer> take(const Buffer& donor);

  // A buffer reading `bytes` of `parent`'s memory from `offset` in place, without allocating or
  // copying (a scan's row of its xs): it keeps `parent` alive, is not counted in the memory
  // stats, and is never given to a primitive to write into (Array::buffer_unshared is false
  // for it). take() of a view gives a copy. ValueError if the range is outside `parent`.
  std::shared_ptr<Buffer> view(std::shared_ptr<const Buffer> parent, std::int64_t offset,
                               std::int64_t bytes);
  // A slot of `arena`: `bytes` of its memory from `offset`, handed out as a buffer of its own
  // (writable, unlike a view) that keeps the arena alive and is not counted; take() of it gives
  // another slot of the same memory. ValueError if the range is outside `arena`.
  std::shared_ptr<Buffer> slot(std::shared_ptr<const Buffer> arena, std::int64_t offset,
                               std::int64_t bytes);

  // Byte copies between this backend's buffers and host memory. They complete before
  // returning: the host may read `dst` of copy_to_host at once, and may free or change `src`
  // of copy_from_host at once (the bytes are on their way; work queued afterwards sees them).
  void copy_to_host(const Buffer& src, void* dst, std::int64_t bytes) const;
  void copy_from_host(const void* src, Buffer& dst, std::int64_t bytes) const;
  // A copy between two of this backend's buffers, queued like compute: work queued afterwards
  // sees `dst`'s new bytes; where `dst` is host memory (pinned_host), the copy has completed
  // when the call returns.
  void copy(const Buffer& src, Buffer& dst, std::int64_t bytes) const;
  // The same, between byte ranges: `bytes` from `src` at `src_offset` to `dst` at `dst_offset`
  // (one row of a stacked array, as scan reads and writes them).
  void copy(const Buffer& src, std::int64_t src_offset, Buffer& dst, std::int64_t dst_offset,
            std::int64_t bytes) const;
  // The same copy, allowed to return before it completes (offloading residuals between memory
  // kinds overlaps with compute this way): everything the backend does afterwards with either
  // buffer — compute, copies, host reads, frees — is ordered after it. Synchronous on the CPU.
  void copy_async(const Buffer& src, Buffer& dst, std::int64_t bytes);
  // Writes `count` copies of the `itemsize`-byte value at `value` (1, 2, 4 or 8 bytes) to the
  // start of `dst`, queued like compute (a fill kernel on a GPU, not an upload).
  void fill(Buffer& dst, const void* value, std::size_t itemsize, std::int64_t count) const;

  // Waits until all work queued on this backend has finished (a no-op on the CPU, which
  // computes eagerly). Timing code calls it before reading the clock.
  virtual void synchronize() const {}
  // The native queue the backend orders its work on, for kernels of one's own
  // (ir::register_impl): a CUDA backend's cudaStream_t, nullptr on the CPU. Work queued there
  // is ordered with flaxpp's allocations, frees, copies and recordings.
  virtual void* stream_handle() const { return nullptr; }
  // Whether work queued now is being recorded (capture(), on this thread or another) rather
  // than run: a kernel of one's own, or a communicator, must then neither wait for the host
  // nor synchronise. Never on the CPU.
  virtual bool capturing() const { return false; }

  // Records the device work `work` queues into a DeviceGraph instead of running it (CUDA
  // stream capture). Buffers `work` allocates and keeps become the recording's: their values
  // exist after each launch(), every launch rewrites them at the same addresses, and they must
  // not be dropped before the first launch (or the recording's destruction). Returns nullptr,
  // with the reason in `why`, where nothing can be recorded: on the CPU, or when `work` did
  // what a recording cannot hold (a synchronisation, a copy to or from the host, pinned
  // memory, freeing a buffer it did not allocate) or threw (its message goes to `why`); the
  // buffers it kept then hold nothing and may only be dropped. Not thread-safe with other work
  // on this backend. A recording's memory comes from the driver beside the backend's pool;
  // memory_stats() counts it as the recorded work allocated it, and each launch counts the
  // work's temporaries toward peak_bytes, as running it did.
  std::unique_ptr<DeviceGraph> capture(const std::function<void()>& work, std::string& why);
  MemoryStats memory_stats(MemoryKind kind = MemoryKind::device) const;
  // Sets every kind's peak to its current live bytes.
  void reset_peak_memory();

 protected:
  explicit Backend(Device device) : device_(device) {}

  // A new buffer of `bytes` (0 allowed) with the given serial; nullptr when there is no room.
  virtual void* allocate_impl(std::int64_t bytes, MemoryKind kind, std::uint64_t serial) = 0;
  virtual void deallocate_impl(const Allocation& allocation) noexcept = 0;
  virtual void copy_to_host_impl(const void* src, void* dst, std::int64_t bytes) const = 0;
  virtual void copy_from_host_impl(const void* src, void* dst, std::int64_t bytes) const = 0;
  virtual void copy_impl(const Buffer& src, std::int64_t src_offset, Buffer& dst,
                         std::int64_t dst_offset, std::int64_t bytes) const = 0;
  virtual void copy_async_impl(const Buffer& src, Buffer& dst, std::int64_t bytes) {
    copy_impl(src, 0, dst, 0, bytes);
  }
  virtual void fill_impl(Buffer& dst, const void* value, std::size_t itemsize,
                         std::int64_t count) const = 0;
  // capture()'s recording; the default records nothing.
  virtual std::unique_ptr<DeviceGraph> capture_impl(const std::function<void()>& work,
                                                    std::string& why);

 private:
  friend class Buffer;
  friend class AccountedGraph;
  void release(const Allocation& allocation) noexcept;
  // view() and slot(): `bytes` of `parent` from `offset`.
  std::shared_ptr<Buffer> part(const char* what, std::shared_ptr<const Buffer> parent,
                               std::int64_t offset, std::int64_t bytes, bool slot);
  // A launch of a recording whose work needs `bytes` beyond the live device bytes at its peak.
  void count_transient(std::int64_t bytes);

  Device device_;
  std::atomic<std::uint64_t> next_serial_{1};
  mutable std::mutex mutex_;
  std::array<MemoryStats, kNumMemoryKinds> stats_{};
};

// The backend of `device`; throws DeviceError when that device is not available (not
// compiled in, no GPU, index out of range), saying which devices are.
Backend& backend(Device device);

// How the backends layer makes a device kind's backends known to core (backend/registry.hpp
// registers the built-in ones as the program starts): how many devices of the kind are
// visible, and the backend of one of them, made on first use and never destroyed.
struct BackendProvider {
  int (*device_count)() = nullptr;
  Backend& (*get)(int index) = nullptr;
};
// Registers (or replaces) the provider of `kind`. Not thread-safe with backend() calls.
void register_backend_provider(DeviceKind kind, BackendProvider provider);

}  // namespace flaxpp
