// run_in_stages: each stage's operands gathered group by group (the program's operands or
// arrays earlier stages made), its results collected in the made arrays' order.
#include "backend/fused_stages.hpp"

#include "flaxpp/core/error.hpp"

namespace flaxpp::backend_impl {

std::vector<Array> run_in_stages(const ir::ElementwiseProgram& program,
                                 const ir::SplitProgram& split, std::span<const Array> in,
                                 std::span<const AVal> out, const RunProgram& run) {
  const auto num_scalars = static_cast<std::size_t>(program.num_scalars);
  const auto num_inputs = static_cast<std::size_t>(program.num_inputs);
  const auto num_outputs = program.outputs.size();
  const std::span<const Array> groups = in.subspan(num_scalars);
  const std::size_t count = groups.size() / num_inputs;
  std::vector<std::vector<Array>> made(count);  // per group, the arrays the stages made
  // The last stage reading each made array: after it the array is dropped (results excepted),
  // so the stages hold no more carried values at once than the program would registers.
  std::vector<int> last_reader;
  for (std::size_t k = 0; k < split.stages.size(); ++k)
    for (const ir::ElementwiseStage::Source& src : split.stages[k].inputs)
      if (src.made) {
        if (last_reader.size() <= static_cast<std::size_t>(src.index))
          last_reader.resize(static_cast<std::size_t>(src.index) + 1, -1);
        last_reader[static_cast<std::size_t>(src.index)] = static_cast<int>(k);
      }
  for (const int r : split.results)
    if (static_cast<std::size_t>(r) < last_reader.size())
      last_reader[static_cast<std::size_t>(r)] = -1;
  for (std::size_t k = 0; k < split.stages.size(); ++k) {
    const ir::ElementwiseStage& stage = split.stages[k];
    std::vector<Array> stage_in;
    for (const int s : stage.scalars)
      stage_in.push_back(in[static_cast<std::size_t>(s)]);
    std::vector<AVal> stage_out;
    for (std::size_t g = 0; g < count; ++g) {
      for (const ir::ElementwiseStage::Source& src : stage.inputs)
        stage_in.push_back(src.made ? made[g].at(static_cast<std::size_t>(src.index))
                                    : groups[g * num_inputs + static_cast<std::size_t>(src.index)]);
      stage_out.insert(stage_out.end(), stage.program->outputs.size(),
                       AVal{groups[g * num_inputs].shape(), out[0].dtype});
    }
    const std::vector<Array> results = run(*stage.program, stage_in, stage_out);
    const std::size_t per_group = stage.program->outputs.size();
    FLAXPP_ASSERT(results.size() == per_group * count, "run_in_stages: ", results.size(),
                  " results of a stage");
    stage_in.clear();
    for (std::size_t g = 0; g < count; ++g) {
      made[g].insert(made[g].end(), results.begin() + static_cast<std::ptrdiff_t>(g * per_group),
                     results.begin() + static_cast<std::ptrdiff_t>((g + 1) * per_group));
      for (std::size_t m = 0; m < last_reader.size() && m < made[g].size(); ++m)
        if (last_reader[m] == static_cast<int>(k)) made[g][m] = Array();
    }
  }
  std::vector<Array> results;
  results.reserve(out.size());
  for (std::size_t g = 0; g < count; ++g)
    for (std::size_t k = 0; k < num_outputs; ++k)
      results.push_back(made[g][static_cast<std::size_t>(split.results[k])]);
  return results;
}

}  // namespace flaxpp::backend_impl
