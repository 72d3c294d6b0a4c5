// CUDA evaluation of fused_elementwise: the groups are packed into as few launches of
// kernels/fused_elementwise_kernel.cuh as its parameter block allows (one for any ordinary
// model's optimiser update), bf16 and f16 computed in float and rounded after each operation.
// A program longer than a launch carries runs in stages (backend/fused_stages.hpp).
#include "backend/cuda/cuda_eval_impl.hpp"
#include "backend/fused_stages.hpp"
#include "flaxpp/core/error.hpp"
#include "flaxpp/ir/elementwise_split.hpp"
#include "kernels/fused_elementwise_kernel.cuh"

namespace flaxpp::cuda {
namespace {

using kernels::compute_t;
using kernels::FusedLaunch;

constexpr ir::ElementwiseLimits kLimits{kernels::kFusedMaxCode, kernels::kFusedMaxScalars};

// A program constant as a weak-typed scalar of dtype S (Array::full's rounding), widened to
// the compute type.
template <class S>
compute_t<S> constant_as(double v) {
  if constexpr (std::is_same_v<S, __nv_bfloat16>) {
    __nv_bfloat16_raw raw;
    raw.x = round_to_bfloat16_bits(v);
    return __bfloat162float(__nv_bfloat16(raw));
  } else if constexpr (std::is_same_v<S, __half>) {
    __half_raw raw;
    raw.x = round_to_float16_bits(v);
    return __half2float(__half(raw));
  } else if constexpr (std::is_same_v<S, float>) {
    return round_to_float32(v);
  } else {
    return v;
  }
}

template <class S>
std::vector<Array> run(const ir::Primitive& prim, const ir::ElementwiseProgram& program,
                       bool donate, std::span<const Array> in, std::span<const AVal> out) {
  static_assert(sizeof(FusedLaunch<S>) <= 32000, "the launch parameters exceed CUDA's limit");
  const Device device = in[0].device();
  const int num_inputs = program.num_inputs;
  const int num_outputs = static_cast<int>(program.outputs.size());
  // The shape rule validated the program: at most kMaxRegisters inputs and outputs, so one
  // group's pointers always fit a launch; the caller split a program over the other limits.
  static_assert(kernels::kFusedMaxPointers >= ir::ElementwiseProgram::kMaxRegisters);
  FLAXPP_ASSERT(ir::fits(program, kLimits),
                "fused_elementwise: an unsplit program over the limits");
  // The parameter block (about 19 KiB) lives on the heap, not the host stack.
  auto p = std::make_unique<FusedLaunch<S>>();
  p->num_code = static_cast<int>(program.code.size());
  std::copy(program.code.begin(), program.code.end(), p->code);
  p->num_scalars = program.num_scalars;
  for (int s = 0; s < program.num_scalars; ++s)
    p->scalars[s] = in_data<S>(in[static_cast<std::size_t>(s)]);
  p->num_inputs = num_inputs;
  static_assert(ir::ElementwiseProgram::kMaxRegisters <= 32, "a mask bit per input");
  p->masks = 0;
  for (int i = 0; i < num_inputs; ++i)
    if (program.is_mask(i)) p->masks |= 1u << i;
  const bool broadcasts = !program.broadcasts.empty();
  for (int i = 0; i < num_inputs; ++i)
    p->inner[i] = program.broadcast_inner(i);
  p->num_constants = static_cast<int>(program.constants.size());
  for (int c = 0; c < p->num_constants; ++c)
    p->constants[c] = constant_as<S>(program.constants[static_cast<std::size_t>(c)]);
  p->num_outputs = num_outputs;
  std::copy(program.outputs.begin(), program.outputs.end(), p->outputs);

  const cudaStream_t stream = backend_of(in[0]).stream();
  auto launch = [&] {
    check_launch(kernels::launch_fused_elementwise(*p, stream), prim.name().c_str());
    p->num_groups = 0;  // offsets[0] stays 0
  };
  std::vector<Array> results;
  results.reserve(out.size());
  const std::span<const Array> groups = in.subspan(static_cast<std::size_t>(program.num_scalars));
  const std::size_t count = groups.size() / static_cast<std::size_t>(num_inputs);
  for (std::size_t g = 0; g < count; ++g) {
    // A broadcast operand's size is the launch's: one group per launch then.
    if (p->num_groups == kernels::kFusedMaxGroups ||
        (p->num_groups + 1) * std::max(num_inputs, num_outputs) > kernels::kFusedMaxPointers ||
        (broadcasts && p->num_groups > 0))
      launch();
    const int k = p->num_groups;
    for (int i = 0; i < num_inputs; ++i)
      p->size[i] =
          groups[g * static_cast<std::size_t>(num_inputs) + static_cast<std::size_t>(i)].size();
    for (int i = 0; i < num_inputs; ++i)  // a mask's bytes travel as an S pointer
      p->in[k * num_inputs + i] = static_cast<const S*>(
          groups[g * static_cast<std::size_t>(num_inputs) + static_cast<std::size_t>(i)]
              .buffer()
              .data());
    const std::span<const Array> group_inputs = groups.subspan(
        g * static_cast<std::size_t>(num_inputs), static_cast<std::size_t>(num_inputs));
    const std::vector<int> from = backend_impl::donated_inputs(group_inputs, program, donate);
    for (int o = 0; o < num_outputs; ++o) {
      if (const int d = from[static_cast<std::size_t>(o)]; d >= 0) {
        const Array& donor = group_inputs[static_cast<std::size_t>(d)];
        backend_of(donor).before_write(in_data<S>(donor));  // an offload copy may read it
        p->out[k * num_outputs + o] = const_cast<S*>(in_data<S>(donor));
        results.push_back(donor);
        continue;
      }
      const Output result(
          out[g * static_cast<std::size_t>(num_outputs) + static_cast<std::size_t>(o)], device);
      p->out[k * num_outputs + o] = result.data<S>();
      results.push_back(result.array());
    }
    p->offsets[k + 1] = p->offsets[k] + groups[g * static_cast<std::size_t>(num_inputs)].size();
    ++p->num_groups;
  }
  launch();
  return results;
}

}  // namespace

std::vector<Array> Families::fused_elementwise(const ir::Primitive& prim, std::span<const Array> in,
                                               const ir::Params& params,
                                               std::span<const AVal> out) {
  if (out.empty()) return {};
  const auto [program, donate] = backend_impl::fused_params(params);
  if (!program.row_reductions.empty())
    throw ValueError(detail::str(
        "fused_elementwise: the program ", program.str(),
        " reduces rows, which the CPU backend runs and this CUDA backend does not yet; jit makes "
        "such programs for the CPU only, so on a GPU bind reduce_sum / reduce_max apart"));
  return visit_dtype<Families::kFp, std::vector<Array>>(
      prim, out[0].dtype, in[0].device(), [&]<class S>(TypeTag<S>) {
        if (ir::fits(program, kLimits)) return run<S>(prim, program, donate, in, out);
        // Longer than a launch carries: in stages, which do not donate.
        return backend_impl::run_in_stages(
            program, ir::split_program(program, kLimits), in, out,
            [&](const ir::ElementwiseProgram& stage, std::span<const Array> stage_in,
                std::span<const AVal> stage_out) {
              return run<S>(prim, stage, false, stage_in, stage_out);
            });
      });
}

}  // namespace flaxpp::cuda
