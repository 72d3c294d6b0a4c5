// The CUDA kernels at the sizes where their second code paths start: grid-stride loops past
// 65536 blocks (more than 16.8M elements), reductions and LayerNorm over more than 65536 rows
// (grid-stride loops that hold barriers and reuse shared memory), split reductions, and more
// than 2^31 elements (64-bit indices), each against the CPU or an exact answer. Every case is
// marked (large): a few seconds on an H100/H200, too long under compute-sanitizer, which
// scripts/gpu_check.sh's memcheck leaves them out of.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/elementwise_program.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "harness/cuda_parity.hpp"
#include "src/backend/cuda/cuda_eval.hpp"

using namespace flaxpp;
using testing::check_against_f64;
using testing::check_parity;
using testing::kNoGpu;
using testing::random_f32;
using testing::values;

namespace {

// 20M + 3 elements: past 65536 blocks of 256 threads (a second grid-stride trip), with a tail
// after the last 16-byte vector of 16-bit elements.
constexpr std::int64_t kBig = 20'000'003;

}  // namespace

TEST_CASE("CUDA (large): elementwise, convert and select past 65536 blocks match the CPU" *
          doctest::skip(kNoGpu)) {
  const Array x = random_f32(Shape{kBig}, 101), y = random_f32(Shape{kBig}, 102);
  check_parity([](auto v) { return v[0] * v[1] + v[0] / v[1]; }, {x, y}, 0);
  check_parity([](auto v) { return sqrt(abs(v[0])); }, {x}, 0);
  check_parity([](auto v) { return astype(astype(v[0] * 1000.0, DType::i32), DType::f32); }, {x},
               0);
  check_parity([](auto v) { return where(greater(v[0], v[1]), v[0], v[1]); }, {x, y}, 0);
}

TEST_CASE("CUDA (large): bf16 and f16 kernels with 16-byte loads give the rounded float results" *
          doctest::skip(kNoGpu)) {
  // One operation in 16 bits is the float operation rounded once: exactly what converting the
  // float32 result gives.
  const Array x = random_f32(Shape{kBig}, 103).to(Device::cuda(0));
  const Array y = random_f32(Shape{kBig}, 104).to(Device::cuda(0));
  for (const DType dtype : {DType::bf16, DType::f16}) {
    CAPTURE(dtype_name(dtype));
    const Array xh = astype(x, dtype), yh = astype(y, dtype);
    const Array xf = astype(xh, DType::f32), yf = astype(yh, DType::f32);
    CHECK(values(xh * yh) == values(astype(xf * yf, dtype)));
    CHECK(values(xh + 0.5) == values(astype(xf + 0.5, dtype)));  // a 0-d operand
    CHECK(values(-xh) == values(astype(-xf, dtype)));
    CHECK(values(exp(xh)) == values(astype(exp(xf), dtype)));
  }
}

TEST_CASE("CUDA (large): gather (transpose, broadcast) and fill past 65536 blocks" *
          doctest::skip(kNoGpu)) {
  const Array m = random_f32(Shape{4001, 5003}, 105);
  check_parity([](auto v) { return lax::transpose(v[0], {1, 0}); }, {m}, 0);
  const Array t = random_f32(Shape{3, 5003, 1400}, 106);
  check_parity([](auto v) { return lax::transpose(v[0], {2, 0, 1}); }, {t}, 0);
  const Array row = random_f32(Shape{5003}, 107);
  check_parity([](auto v) { return lax::broadcast_in_dim(v[0], Shape{4001, 5003}, {1}); }, {row},
               0);
  const Array full = Array::full(Shape{kBig}, -3.5, DType::f32, Device::cuda(0));
  CHECK(values(max(full)) == std::vector<double>{-3.5});
  CHECK(values(max(-full)) == std::vector<double>{3.5});
  const Array half = Array::full(Shape{kBig}, 0.1, DType::bf16, Device::cuda(0));
  CHECK(values(max(half)) == values(-max(-half)));
}

TEST_CASE("CUDA (large): reductions split over many blocks, and over more than 65536 rows" *
          doctest::skip(kNoGpu)) {
  // A full sum (split rows), a bias gradient's column sum over 70000 rows (split columns),
  // rows of 1100 (one block per row, grid-stride past 65536 rows) and of 64 (a warp per row).
  // Sums are checked against float64 sums of the same values: the CPU's one running float32
  // sum over 70000 rows is further from them than the GPU's tree.
  const Array v = random_f32(Shape{kBig}, 108);
  check_against_f64([](auto a) { return sum(a[0]); }, {v}, 1e-4);
  check_parity([](auto a) { return max(a[0]); }, {v}, 0);
  const Array cols = random_f32(Shape{70000, 512}, 109);
  check_against_f64([](auto a) { return sum(a[0], Axes{0}); }, {cols}, 1e-4);
  check_parity([](auto a) { return max(a[0], Axes{0}); }, {cols}, 0);
  const Array long_rows = random_f32(Shape{70000, 1100}, 110);
  check_against_f64([](auto a) { return sum(a[0], Axes{1}); }, {long_rows}, 2e-5);
  check_parity([](auto a) { return max(a[0], Axes{1}); }, {long_rows}, 0);
  const Array short_rows = random_f32(Shape{300000, 64}, 111);
  check_against_f64([](auto a) { return sum(a[0], Axes{1}); }, {short_rows}, 1e-5);
}

TEST_CASE("CUDA (large): LayerNorm forward and backward over more than 65536 rows" *
          doctest::skip(kNoGpu)) {
  const Array x = random_f32(Shape{70000, 96}, 112), dy = random_f32(Shape{70000, 96}, 113);
  const Array scale = random_f32(Shape{96}, 114), bias = random_f32(Shape{96}, 115);
  check_parity([](auto v) { return lax::layer_norm(v[0], v[1], v[2], 1e-6); }, {x, scale, bias},
               1e-5);
  check_parity([](auto v) { return lax::layer_norm_dx(v[0], v[1], v[2], 1e-6); }, {x, scale, dy},
               1e-4);
  // dscale sums 70000 rows: split into row chunks, then the chunks' partials (checked against
  // float64, as the sums above).
  check_against_f64([](auto v) { return lax::layer_norm_dscale(v[0], v[1], 1e-6); }, {x, dy},
                    1e-4);
}

TEST_CASE("CUDA (large): fused_elementwise past 65536 blocks, and over more groups than a launch" *
          doctest::skip(kNoGpu)) {
  ir::ElementwiseBuilder b;
  const ir::EValue s = b.scalar(), g = b.input(), p = b.input();
  b.output(p - s * g, p);
  b.output(ir::sqrt(g * g + 1.0) / (p * p + 2.0));
  const auto program = b.finish();
  const Array lr = Array::scalar(0.125f, Device::cpu());
  auto run = [&](std::span<const Array> v) {
    return lax::fused_elementwise(program, v.first(1), v.subspan(1));
  };
  // One group of 20M elements.
  const std::vector<Array> big = {lr, random_f32(Shape{kBig}, 116), random_f32(Shape{kBig}, 117)};
  for (int k = 0; k < 2; ++k)
    check_parity([&](auto v) { return run(v)[static_cast<std::size_t>(k)]; }, big, 0);
  // 300 groups (more than the 192 a launch holds) of 2 inputs and 2 outputs: two launches.
  std::vector<Array> many = {lr};
  for (unsigned i = 0; i < 300; ++i) {
    many.push_back(random_f32(Shape{1 + i % 37, 3}, 200 + i));
    many.push_back(random_f32(Shape{1 + i % 37, 3}, 600 + i));
  }
  std::vector<Array> on_gpu;
  for (const Array& a : many)
    on_gpu.push_back(a.to(Device::cuda(0)));
  const std::vector<Array> want = run(many), got = run(on_gpu);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    REQUIRE(values(got[i]) == values(want[i]));
}

TEST_CASE("CUDA (large): more than 2^31 elements (64-bit indices), where memory allows" *
          doctest::skip(kNoGpu)) {
  // bf16[65537, 32768]: 2^31 + 32768 elements, 4 GiB each; at most three alive at once (about
  // 12 GiB).
  const std::int64_t rows = 65537, cols = 32768;
  if (cuda::device_memory_bytes(Device::cuda(0)) < std::int64_t{16} << 30) {
    MESSAGE("SKIPPED: a 2^31-element case needs about 12 GiB of GPU memory; this GPU has "
            << cuda::device_memory_bytes(Device::cuda(0)) << " bytes");
    return;
  }
  Array twice;
  {
    const Array ones = Array::full(Shape{rows, cols}, 1.0, DType::bf16, Device::cuda(0));
    REQUIRE(ones.size() > (std::int64_t{1} << 31));
    // Row sums of 32768 ones: a power of two, exact in bf16 after float accumulation.
    const std::vector<double> row_sums = values(sum(ones, Axes{1}));
    CHECK(row_sums.size() == static_cast<std::size_t>(rows));
    CHECK(row_sums.front() == 32768.0);
    CHECK(row_sums.back() == 32768.0);
    twice = ones + ones;  // elementwise with 64-bit indices
  }
  CHECK(values(max(twice)) == std::vector<double>{2.0});
  CHECK(values(max(-twice)) == std::vector<double>{-2.0});
  // A rank-3 permutation: the 64-bit gather (a 2-D transpose would take the tiled kernel).
  const Array t = lax::transpose(lax::reshape(twice, Shape{rows, 2, cols / 2}), {1, 0, 2});
  CHECK(t.shape() == Shape{2, rows, cols / 2});
  CHECK(values(max(t)) == std::vector<double>{2.0});
}
