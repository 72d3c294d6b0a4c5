// The CPU backend's registration: one device, made on first use, and the CPU evaluator.
#include "backend/registry.hpp"

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/cpu_eval.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp::cpu {
namespace {

Backend& the_cpu(int /*index*/) {
  // Never destroyed: buffers held by static Arrays may be released during program exit,
  // after function-local statics would have been.
  static auto* const cpu_backend = new CpuBackend();
  return *cpu_backend;
}

[[gnu::constructor(FLAXPP_REGISTRATION_PRIORITY)]] void register_cpu() {
  register_backend_provider(DeviceKind::cpu, {[] { return 1; }, the_cpu});
  ir::register_evaluator(DeviceKind::cpu, eval);
  register_attention();
}

}  // namespace
}  // namespace flaxpp::cpu
