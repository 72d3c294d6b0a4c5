// Backends: live/peak byte accounting per memory kind, devices and the default device.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/backend.hpp"

using namespace flaxpp;

TEST_CASE(
    "CPU backend: live bytes follow arrays' lifetimes and the peak is their high-water mark") {
  Backend& cpu = backend(Device::cpu());
  const std::int64_t live0 = cpu.memory_stats().live_bytes;
  cpu.reset_peak_memory();
  {
    const Array a = Array::full(Shape{256}, 1.0, DType::f32);  // 1 KiB
    CHECK(cpu.memory_stats().live_bytes == live0 + 1024);
    {
      const Array b = Array::full(Shape{512}, 1.0, DType::f64);  // 4 KiB
      CHECK(cpu.memory_stats().live_bytes == live0 + 1024 + 4096);
    }
    CHECK(cpu.memory_stats().live_bytes == live0 + 1024);
  }
  const MemoryStats s = cpu.memory_stats();
  CHECK(s.live_bytes == live0);
  CHECK(s.peak_bytes == live0 + 1024 + 4096);
  cpu.reset_peak_memory();
  CHECK(cpu.memory_stats().peak_bytes == live0);
}

TEST_CASE("CPU backend: pinned_host allocations are counted apart from device memory") {
  Backend& cpu = backend(Device::cpu());
  const MemoryStats device0 = cpu.memory_stats(MemoryKind::device);
  const MemoryStats host0 = cpu.memory_stats(MemoryKind::pinned_host);
  {
    auto buffer = cpu.allocate(100, MemoryKind::pinned_host);
    CHECK(buffer->memory_kind() == MemoryKind::pinned_host);
    CHECK(cpu.memory_stats(MemoryKind::pinned_host).live_bytes == host0.live_bytes + 100);
    CHECK(cpu.memory_stats(MemoryKind::pinned_host).live_buffers == host0.live_buffers + 1);
    CHECK(cpu.memory_stats(MemoryKind::device).live_bytes == device0.live_bytes);
  }
  CHECK(cpu.memory_stats(MemoryKind::pinned_host).live_bytes == host0.live_bytes);
}

TEST_CASE("CPU backend: zero-byte buffers are valid and distinct; negative sizes are rejected") {
  Backend& cpu = backend(Device::cpu());
  auto a = cpu.allocate(0);
  auto b = cpu.allocate(0);
  CHECK(a->data() != nullptr);
  CHECK(a->data() != b->data());
  CHECK_THROWS_AS(cpu.allocate(-1), ValueError);
}

TEST_CASE("CPU backend: a freed large block is reused for the next request of its size") {
  Backend& cpu = backend(Device::cpu());
  const std::int64_t live0 = cpu.memory_stats().live_bytes;
  const void* first = nullptr;
  {
    const auto a = cpu.allocate(1 << 20);
    first = a->data();
  }
  CHECK(cpu.memory_stats().live_bytes == live0);  // cached blocks are not live bytes
  // Any size that rounds to the same pages gets the cached block back; data stays aligned.
  const auto b = cpu.allocate((1 << 20) - 100);
  CHECK(b->data() == first);
  CHECK(reinterpret_cast<std::uintptr_t>(b->data()) % 64 == 0);
  CHECK(cpu.memory_stats().live_bytes == live0 + (1 << 20) - 100);
}

TEST_CASE("CPU backend: copies larger than the buffer are rejected") {
  Backend& cpu = backend(Device::cpu());
  auto buffer = cpu.allocate(8);
  std::array<std::byte, 16> host{};
  CHECK_THROWS_WITH_AS(cpu.copy_from_host(host.data(), *buffer, 16),
                       doctest::Contains("cannot copy 16 bytes"), ValueError);
}

TEST_CASE("Backend::copy between byte ranges: one row to another place; ranges are checked") {
  Backend& cpu = backend(Device::cpu());
  const Array rows = Array::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{3, 2});
  auto out = cpu.allocate(4 * sizeof(float));
  cpu.fill(*out, std::array<std::byte, 4>{}.data(), 4, 4);
  cpu.copy(rows.buffer(), 2 * sizeof(float), *out, 2 * sizeof(float), 2 * sizeof(float));
  CHECK(Array(out, Shape{4}, DType::f32).to_vector<float>() == std::vector<float>{0, 0, 3, 4});
  CHECK_THROWS_WITH_AS(cpu.copy(rows.buffer(), 20, *out, 0, 8),
                       doctest::Contains("cannot copy 8 bytes at offset 20 with a buffer of 24"),
                       ValueError);
  CHECK_THROWS_WITH_AS(cpu.copy(rows.buffer(), 0, *out, -4, 4), doctest::Contains("at offset -4"),
                       ValueError);
}

TEST_CASE("ArenaPlacement: allocations of a slot's size take it in order, uncounted; scopes nest") {
  Backend& cpu = backend(Device::cpu());
  const std::shared_ptr<Buffer> arena = cpu.allocate(4096);
  const auto* base = static_cast<const std::byte*>(arena->data());
  const std::int64_t live0 = cpu.memory_stats().live_bytes;
  {
    ArenaPlacement outer(cpu, arena, {{1024, 512}, {0, 512}, {2048, 256}});
    const std::shared_ptr<Buffer> a = cpu.allocate(512);  // the first unused slot of 512 bytes
    const std::shared_ptr<Buffer> b = cpu.allocate(512);
    const std::shared_ptr<Buffer> c = cpu.allocate(512);  // none left: new memory
    CHECK(a->data() == base + 1024);
    CHECK(b->data() == base);
    CHECK((a->is_slot() && !a->is_view() && !c->is_slot()));
    CHECK(cpu.memory_stats().live_bytes == live0 + 512);  // only c
    {
      ArenaPlacement inner(cpu, arena, {});
      CHECK(cpu.allocate(256)->data() != base + 2048);  // the inner scope has no slots
    }
    CHECK(cpu.allocate(256)->data() == base + 2048);
    {
      // A slot with a negative offset is new memory, taken in its turn: the result kept apart
      // does not take the next one's slot.
      ArenaPlacement in_order(cpu, arena, {{-1, 128}, {3072, 128}});
      CHECK(cpu.allocate(128)->is_slot() == false);
      CHECK(cpu.allocate(128)->data() == base + 3072);
    }
    CHECK(cpu.allocate(256, MemoryKind::pinned_host)->memory_kind() == MemoryKind::pinned_host);
    // A slot is written like a buffer of its own: a primitive may take it over.
    const std::shared_ptr<Buffer> taken = cpu.take(*a);
    CHECK((taken->data() == base + 1024 && taken->is_slot() && a->donated()));
  }
  CHECK(cpu.allocate(512)->data() != base + 1024);  // placement ended with its scope
  CHECK(cpu.memory_stats().live_bytes == live0);
  CHECK_THROWS_WITH_AS(cpu.slot(arena, 4000, 512), doctest::Contains("outside a buffer of 4096"),
                       ValueError);
}

TEST_CASE("Memory kinds are spelled as in JAX; unknown kinds are a clear error") {
  CHECK(memory_kind_from_name("pinned_host") == MemoryKind::pinned_host);
  CHECK(memory_kind_name(MemoryKind::device) == "device");
  CHECK_THROWS_WITH_AS(memory_kind_from_name("host"),
                       doctest::Contains("expected \"device\" or \"pinned_host\""), ValueError);
}

TEST_CASE("Device: parses cpu, cuda and cuda:N and rejects anything else") {
  CHECK(Device::parse("cpu") == Device::cpu());
  CHECK(Device::parse("cuda") == Device::cuda(0));
  CHECK(Device::parse("cuda:3") == Device::cuda(3));
  CHECK(Device::cuda(1).str() == "cuda:1");
  CHECK_THROWS_AS(Device::parse("tpu"), ValueError);
  CHECK_THROWS_AS(Device::parse("cuda:x"), ValueError);
  // Found by fuzz_train_config: long indices were multiplied out before being refused (signed
  // overflow, UBSan in the sanitizer build).
  CHECK_THROWS_AS(Device::parse("cuda:yyyzyyyy0"), ValueError);
  CHECK_THROWS_AS(Device::parse("cuda:99999999999999999999"), ValueError);
  CHECK(Device::parse("cuda:99999") == Device::cuda(99999));
}

TEST_CASE("Device: asking for an unavailable GPU is a clear DeviceError") {
  if (is_available(DeviceKind::cuda)) {
    CHECK_THROWS_AS(backend(Device::cuda(4096)), DeviceError);
  } else {
    CHECK_THROWS_AS(backend(Device::cuda(0)), DeviceError);
    CHECK_THROWS_AS(set_default_device(Device::cuda(0)), DeviceError);
    CHECK(default_device() == Device::cpu());
  }
}

TEST_CASE("CPU backend: capture records nothing, says why, runs nothing and leaves the peak") {
  Backend& cpu = backend(Device::cpu());
  cpu.reset_peak_memory();
  const std::int64_t peak = cpu.memory_stats().peak_bytes;
  std::string why;
  bool ran = false;
  CHECK(cpu.capture([&] { ran = true; }, why) == nullptr);
  CHECK(!ran);
  CHECK(why.find("records nothing") != std::string::npos);
  CHECK(cpu.memory_stats().peak_bytes == peak);
}

TEST_CASE("Backend::fill: writes the value of each item size into the first count items only") {
  Backend& cpu = backend(Device::cpu());
  auto buffer = cpu.allocate(64);
  std::memset(buffer->data(), 0x5a, 64);
  const std::uint16_t half_one = 0x3f80;  // bf16 1.0
  cpu.fill(*buffer, &half_one, 2, 7);
  const auto* bytes = static_cast<const std::uint8_t*>(buffer->data());
  for (int i = 0; i < 7; ++i) {
    std::uint16_t v = 0;
    std::memcpy(&v, bytes + 2 * i, 2);
    CHECK(v == half_one);
  }
  CHECK(bytes[14] == 0x5a);  // past the count: untouched
  const double pi = 3.25;
  cpu.fill(*buffer, &pi, 8, 8);
  CHECK(static_cast<const double*>(buffer->data())[7] == 3.25);
  CHECK_THROWS_WITH_AS(cpu.fill(*buffer, &pi, 8, 9), doctest::Contains("cannot write 9 values"),
                       ValueError);
}

TEST_CASE("Array::full: every dtype, on the default device, without an upload") {
  CHECK(Array::full(Shape{3}, 2.5, DType::f32).to_vector<float>() == std::vector<float>(3, 2.5f));
  CHECK(Array::full(Shape{2, 2}, -1, DType::i32).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>(4, -1));
  CHECK(Array::full(Shape{5}, 1, DType::bool_).to_vector<bool>() == std::vector<bool>(5, true));
  CHECK(Array::full(Shape{0}, 1.0, DType::f64).size() == 0);
  CHECK_THROWS_AS(Array::full(Shape{1}, 1e10, DType::i32), ValueError);
}
