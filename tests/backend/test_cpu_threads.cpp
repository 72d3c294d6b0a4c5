// The CPU's own kernel loops on its threads (src/backend/cpu/cpu_parallel.hpp): a fused program
// over a large group, donated or not, with row reductions, reductions along the last and the
// leading axes, LayerNorm's forward pass, dx and dscale, unfused unary and binary primitives, a
// transpose and a copy give the same bits with one thread as with two or three, and with more
// than one they are shared out (where the build has oneDNN's OpenMP threads). The arrays live on
// the CPU whatever the suite's default device.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "flaxpp/backend/cpu.hpp"
#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/elementwise_program.hpp"
#include "flaxpp/ir/lax.hpp"
#include "harness/cpu_settings_guard.hpp"

using namespace flaxpp;

namespace {

Array wave(const Shape& shape, float phase) {
  std::vector<float> v(static_cast<std::size_t>(shape.size()));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = 3.0f * static_cast<float>(std::sin(0.001 * static_cast<double>(i) + phase));
  return Array::from_vector(v, shape, Device::cpu());
}

std::vector<std::uint32_t> bits(const Array& a) {
  const std::vector<float> v = a.to_vector<float>();
  std::vector<std::uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

// A softmax-and-GELU-like program over (64, 4, 64, 65) elements (an odd last axis, so that
// chunks straddle rows): exp of x less a per-row value, tanh, a bias along the last axis.
std::vector<std::vector<std::uint32_t>> run_all(bool donate) {
  const Shape full{64, 4, 64, 65};
  ir::ElementwiseBuilder b;
  const ir::EValue x = b.input(), row = b.broadcast_input(65), bias = b.broadcast_input(1);
  b.output(ir::exp(x - row) * ir::tanh(x * 0.5) + bias);
  b.output(x * x);
  const auto program = b.finish();
  const Array xa = wave(full, 0.0f), ra = wave(Shape{64, 4, 64, 1}, 1.0f),
              ba = wave(Shape{65}, 2.0f);
  std::vector<std::vector<std::uint32_t>> out;
  // Donated, operand 0 is a copy nothing else holds.
  std::vector<Array> operands{
      donate ? Array::from_vector(xa.to_vector<float>(), full, Device::cpu()) : xa, ra, ba};
  const std::vector<Array> fused =
      donate ? lax::fused_elementwise_donated(program, {}, std::move(operands))
             : lax::fused_elementwise(program, {}, operands);
  for (const Array& f : fused)
    out.push_back(bits(f));
  // Row reductions: rows of 65 (three to a chunk) and of 64·65 (across chunks).
  for (const int axes : {1, 2}) {
    ir::ElementwiseBuilder r;
    const ir::EValue v = r.input();
    const ir::EValue e = ir::exp(v * 0.5);
    r.output(e);
    r.reduce_rows(ir::ElementwiseProgram::Op::add, e, axes);
    r.reduce_rows(ir::ElementwiseProgram::Op::max, v, axes);
    for (const Array& f : lax::fused_elementwise(r.finish(), {}, std::span(&xa, 1)))
      out.push_back(bits(f));
  }
  out.push_back(bits(lax::reduce_max(xa, {3})));
  out.push_back(bits(lax::reduce_sum(xa, {2, 3})));
  const Array scale = wave(Shape{65}, 3.0f), dy = wave(full, 4.0f);
  out.push_back(bits(lax::layer_norm(xa, scale, ba, 1e-6)));
  out.push_back(bits(lax::layer_norm_dx(xa, scale, dy, 1e-6)));
  out.push_back(bits(lax::layer_norm_dscale(xa, dy, 1e-6)));  // rows' stats, then columns
  out.push_back(bits(lax::reduce_sum(xa, {0, 1})));           // columns, each over its rows
  out.push_back(bits(lax::mul(xa, dy)));
  out.push_back(bits(lax::tanh(xa)));
  out.push_back(bits(lax::integer_pow(xa, 3)));
  out.push_back(bits(lax::transpose(xa, {2, 0, 3, 1})));
  out.push_back(bits(xa.copy()));  // a copy within the device (a scan's rows)
  return out;
}

}  // namespace

TEST_CASE("cpu threads: the CPU's own loops give the same bits for every thread count") {
  const testing::CpuSettingsGuard guard;
  for (const bool donate : {false, true}) {
    CAPTURE(donate);
    cpu::set_num_threads(1);
    const std::int64_t before = cpu::shared_loops();
    const auto one = run_all(donate);
    CHECK(cpu::shared_loops() == before);  // one thread shares nothing out
    for (const int threads : {2, 3}) {
      CAPTURE(threads);
      cpu::set_num_threads(threads);
      const std::int64_t start = cpu::shared_loops();
      CHECK(run_all(donate) == one);
      // Every one of them ran shared where the build has oneDNN's threads (Debian's runs on
      // OpenMP).
      if (cpu::has_onednn()) CHECK(cpu::shared_loops() - start == 15);
    }
  }
}
