// Backend base class: validation and live/peak accounting around the backends' *_impl.
#include "flaxpp/core/backend.hpp"

#include <algorithm>

#include "flaxpp/core/error.hpp"

namespace flaxpp {

std::string_view memory_kind_name(MemoryKind kind) {
  return kind == MemoryKind::device ? "device" : "pinned_host";
}

MemoryKind memory_kind_from_name(std::string_view name) {
  if (name == "device") return MemoryKind::device;
  if (name == "pinned_host") return MemoryKind::pinned_host;
  throw ValueError(detail::str("unknown memory kind \"", name,
                               "\"; expected \"device\" or \"pinned_host\" (JAX's memory kinds)"));
}

Buffer::~Buffer() {
  if (!donated_ && parent_ == nullptr) backend_->release(allocation_);
}

namespace {
thread_local ArenaPlacement* active_placement = nullptr;
}  // namespace

ArenaPlacement::ArenaPlacement(Backend& backend, std::shared_ptr<const Buffer> arena,
                               std::vector<Slot> slots)
    : backend_(&backend),
      arena_(std::move(arena)),
      slots_(std::move(slots)),
      used_(slots_.size(), false),
      outer_(active_placement) {
  active_placement = this;
}

ArenaPlacement::~ArenaPlacement() {
  active_placement = outer_;
}

std::shared_ptr<Buffer> ArenaPlacement::take(Backend& backend, std::int64_t bytes) {
  if (&backend != backend_) return nullptr;
  for (std::size_t i = 0; i < slots_.size(); ++i)
    if (!used_[i] && slots_[i].bytes == bytes) {
      used_[i] = true;
      if (slots_[i].offset < 0) return nullptr;
      return backend.slot(slots_[i].in ? slots_[i].in : arena_, slots_[i].offset, bytes);
    }
  return nullptr;
}

Device Buffer::device() const {
  return backend_->device();
}

std::shared_ptr<Buffer> Backend::allocate(std::int64_t bytes, MemoryKind kind) {
  if (bytes < 0) throw ValueError(detail::str("Backend::allocate: negative size ", bytes));
  if (active_placement != nullptr && kind == MemoryKind::device)
    if (std::shared_ptr<Buffer> placed = active_placement->take(*this, bytes)) return placed;
  const std::uint64_t serial = next_serial_.fetch_add(1, std::memory_order_relaxed);
  void* data = allocate_impl(bytes, kind, serial);
  if (data == nullptr) {
    const MemoryStats s = memory_stats(kind);
    throw OutOfMemoryError(
        detail::str("out of ", memory_kind_name(kind), " memory on ", device_,
                    ": could not allocate ", bytes, " bytes with ", s.live_bytes, " bytes live in ",
                    s.live_buffers, " buffers (peak ", s.peak_bytes,
                    "). Free arrays you no longer need, use a smaller batch, or choose a remat "
                    "policy that saves fewer residuals (e.g. dots_with_no_batch_dims_saveable or "
                    "nothing_saveable)"));
  }
  {
    std::lock_guard lock(mutex_);
    MemoryStats& s = stats_[static_cast<std::size_t>(kind)];
    s.live_bytes += bytes;
    s.peak_bytes = std::max(s.peak_bytes, s.live_bytes);
    s.live_buffers += 1;
    s.total_allocations += 1;
  }
  return std::shared_ptr<Buffer>(new Buffer(this, Allocation{data, bytes, kind, serial}));
}

std::shared_ptr<Buffer> Backend::take(const Buffer& donor) {
  FLAXPP_ASSERT(&donor.backend() == this, "buffer of another backend");
  if (donor.donated_)
    throw ValueError("a buffer was donated twice; each donated array can be given up once");
  if (donor.is_slot()) {  // the arena's memory, handed on as a slot
    donor.donated_ = true;
    return std::shared_ptr<Buffer>(new Buffer(this, donor.allocation_, donor.parent_, true));
  }
  if (donor.is_view()) {  // it owns nothing to give: a copy of what it reads
    std::shared_ptr<Buffer> copied = allocate(donor.bytes(), donor.memory_kind());
    copy(donor, *copied, donor.bytes());
    donor.donated_ = true;
    return copied;
  }
  auto taken = std::shared_ptr<Buffer>(new Buffer(this, donor.allocation_));
  donor.donated_ = true;
  return taken;
}

std::shared_ptr<Buffer> Backend::part(const char* what, std::shared_ptr<const Buffer> parent,
                                      std::int64_t offset, std::int64_t bytes, bool slot) {
  FLAXPP_ASSERT(parent != nullptr && &parent->backend() == this, what,
                " of another backend's buffer");
  if (offset < 0 || bytes < 0 || offset > parent->bytes() || bytes > parent->bytes() - offset)
    throw ValueError(detail::str("Backend::", what, ": ", bytes, " bytes at offset ", offset,
                                 " are outside a buffer of ", parent->bytes(), " bytes"));
  const Allocation a{static_cast<std::byte*>(parent->data()) + offset, bytes, parent->memory_kind(),
                     next_serial_.fetch_add(1, std::memory_order_relaxed)};
  return std::shared_ptr<Buffer>(new Buffer(this, a, std::move(parent), slot));
}

std::shared_ptr<Buffer> Backend::view(std::shared_ptr<const Buffer> parent, std::int64_t offset,
                                      std::int64_t bytes) {
  return part("view", std::move(parent), offset, bytes, false);
}

std::shared_ptr<Buffer> Backend::slot(std::shared_ptr<const Buffer> arena, std::int64_t offset,
                                      std::int64_t bytes) {
  return part("slot", std::move(arena), offset, bytes, true);
}

void Backend::release(const Allocation& allocation) noexcept {
  deallocate_impl(allocation);
  std::lock_guard lock(mutex_);
  MemoryStats& s = stats_[static_cast<std::size_t>(allocation.kind)];
  s.live_bytes -= allocation.bytes;
  s.live_buffers -= 1;
}

namespace {
void check_copy(const char* what, const Buffer& buffer, std::int64_t bytes,
                std::int64_t offset = 0) {
  if (bytes < 0 || offset < 0 || offset > buffer.bytes() || bytes > buffer.bytes() - offset)
    throw ValueError(detail::str(what, ": cannot copy ", bytes, " bytes at offset ", offset,
                                 " with a buffer of ", buffer.bytes(), " bytes"));
}
}  // namespace

void Backend::copy_to_host(const Buffer& src, void* dst, std::int64_t bytes) const {
  FLAXPP_ASSERT(&src.backend() == this, "buffer of another backend");
  check_copy("Backend::copy_to_host", src, bytes);
  if (bytes > 0) copy_to_host_impl(src.data(), dst, bytes);
}

void Backend::copy_from_host(const void* src, Buffer& dst, std::int64_t bytes) const {
  FLAXPP_ASSERT(&dst.backend() == this, "buffer of another backend");
  check_copy("Backend::copy_from_host", dst, bytes);
  if (bytes > 0) copy_from_host_impl(src, dst.data(), bytes);
}

void Backend::copy(const Buffer& src, Buffer& dst, std::int64_t bytes) const {
  copy(src, 0, dst, 0, bytes);
}

void Backend::copy(const Buffer& src, std::int64_t src_offset, Buffer& dst, std::int64_t dst_offset,
                   std::int64_t bytes) const {
  FLAXPP_ASSERT(&src.backend() == this && &dst.backend() == this, "buffer of another backend");
  check_copy("Backend::copy", src, bytes, src_offset);
  check_copy("Backend::copy", dst, bytes, dst_offset);
  if (bytes > 0) copy_impl(src, src_offset, dst, dst_offset, bytes);
}

void Backend::copy_async(const Buffer& src, Buffer& dst, std::int64_t bytes) {
  FLAXPP_ASSERT(&src.backend() == this && &dst.backend() == this, "buffer of another backend");
  check_copy("Backend::copy_async", src, bytes);
  check_copy("Backend::copy_async", dst, bytes);
  if (bytes > 0) copy_async_impl(src, dst, bytes);
}

void Backend::fill(Buffer& dst, const void* value, std::size_t itemsize, std::int64_t count) const {
  FLAXPP_ASSERT(&dst.backend() == this, "buffer of another backend");
  FLAXPP_ASSERT(itemsize == 1 || itemsize == 2 || itemsize == 4 || itemsize == 8,
                "Backend::fill: itemsize ", itemsize);
  if (count < 0 || count > dst.bytes() / static_cast<std::int64_t>(itemsize))
    throw ValueError(detail::str("Backend::fill: cannot write ", count, " values of ", itemsize,
                                 " bytes into a buffer of ", dst.bytes(), " bytes"));
  if (count > 0) fill_impl(dst, value, itemsize, count);
}

MemoryStats Backend::memory_stats(MemoryKind kind) const {
  std::lock_guard lock(mutex_);
  return stats_[static_cast<std::size_t>(kind)];
}

std::unique_ptr<DeviceGraph> Backend::capture_impl(const std::function<void()>&, std::string& why) {
  why = detail::str("the ", device(), " backend runs work as it is queued; it records nothing");
  return nullptr;
}

// A recording whose launches count its work's temporaries toward the device's peak: the
// allocations of replayed work are not made through the backend again.
class AccountedGraph final : public DeviceGraph {
 public:
  AccountedGraph(Backend& backend, std::unique_ptr<DeviceGraph> graph, std::int64_t transient)
      : backend_(backend), graph_(std::move(graph)), transient_(transient) {}
  void launch() override {
    graph_->launch();
    backend_.count_transient(transient_);
  }

 private:
  Backend& backend_;
  std::unique_ptr<DeviceGraph> graph_;
  std::int64_t transient_;
};

std::unique_ptr<DeviceGraph> Backend::capture(const std::function<void()>& work, std::string& why) {
  MemoryStats& s = stats_[static_cast<std::size_t>(MemoryKind::device)];
  std::int64_t peak_before = 0;
  {
    std::lock_guard lock(mutex_);
    peak_before = s.peak_bytes;
    s.peak_bytes = s.live_bytes;
  }
  std::unique_ptr<DeviceGraph> graph;
  try {
    graph = capture_impl(work, why);
  } catch (...) {
    std::lock_guard lock(mutex_);
    s.peak_bytes = peak_before;
    throw;
  }
  std::int64_t transient = 0;
  {
    std::lock_guard lock(mutex_);
    // What the work needed beyond what it kept (the kept buffers stay live between launches).
    // A failed recording allocated nothing: the peak stays as it was.
    transient = s.peak_bytes - s.live_bytes;
    s.peak_bytes = graph ? std::max(peak_before, s.peak_bytes) : peak_before;
  }
  if (graph == nullptr) return nullptr;
  return std::make_unique<AccountedGraph>(*this, std::move(graph), transient);
}

void Backend::count_transient(std::int64_t bytes) {
  std::lock_guard lock(mutex_);
  MemoryStats& s = stats_[static_cast<std::size_t>(MemoryKind::device)];
  s.peak_bytes = std::max(s.peak_bytes, s.live_bytes + bytes);
}

void Backend::reset_peak_memory() {
  std::lock_guard lock(mutex_);
  for (MemoryStats& s : stats_)
    s.peak_bytes = s.live_bytes;
}

}  // namespace flaxpp
