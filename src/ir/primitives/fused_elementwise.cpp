// fused_elementwise: an ElementwiseProgram applied to groups of arrays in one primitive, so
// that a backend runs a chain of elementwise operations (an optimiser's whole update) as one
// pass over memory, and on CUDA as one kernel for every group.
#include "rules.hpp"

namespace flaxpp::lax {
namespace {

const char* const kName = "fused_elementwise";

std::vector<AVal> shape_rule(std::span<const AVal> in, const ir::Params& params) {
  const auto& program = params.get<std::shared_ptr<const ir::ElementwiseProgram>>("program");
  FLAXPP_ASSERT(program != nullptr, "fused_elementwise without a program");
  program->validate();  // the backends index registers by it
  const auto scalars = static_cast<std::size_t>(program->num_scalars);
  const auto per_group = static_cast<std::size_t>(program->num_inputs);
  if (in.size() < scalars || per_group == 0 || (in.size() - scalars) % per_group != 0)
    rules::fail(kName,
                detail::str("the program takes ", scalars, " 0-d operands and then groups of ",
                            per_group, " arrays; got ", in.size(), " operands"));
  std::vector<AVal> out;
  if (in.empty()) return out;
  // A mask operand is bool; every other one has the program's floating dtype.
  const auto is_mask = [&](std::size_t i) {
    return i >= scalars && program->is_mask(static_cast<int>((i - scalars) % per_group));
  };
  std::size_t first = 0;
  while (first < in.size() && is_mask(first))
    ++first;
  if (first == in.size())
    rules::fail(kName, "the program reads masks only; it needs a floating operand for its dtype");
  const DType dtype = in[first].dtype;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (is_mask(i)) {
      if (in[i].dtype != DType::bool_)
        rules::fail(kName, detail::str("operand ", i, " is a mask and must be bool, got ", in[i]));
      continue;
    }
    rules::expect_floating(kName, in[i]);
    if (in[i].dtype != dtype)
      rules::fail(kName, detail::str("all operands but masks must have one dtype; operand ", i,
                                     " is ", in[i], ", operand ", first, " is ", in[first]));
    if (i < scalars && in[i].shape.rank() != 0)
      rules::fail(kName, detail::str("operand ", i, " must be 0-d (a scalar), got ", in[i]));
  }
  for (std::size_t g = scalars; g < in.size(); g += per_group) {
    const std::int64_t n = in[g].shape.size();
    for (std::size_t i = g + 1; i < g + per_group; ++i) {
      const std::int64_t inner = program->broadcast_inner(static_cast<int>(i - g));
      if (inner == 0 && in[i].shape != in[g].shape)
        rules::fail(kName, detail::str("the arrays of a group must have one shape; operand ", i,
                                       " is ", in[i], ", operand ", g, " is ", in[g]));
      // A broadcast operand: element e of the group reads its element (e / inner) % size.
      const std::int64_t span = in[i].shape.size() * inner;
      if (inner > 0 && (span == 0 ? n != 0 : n % span != 0))
        rules::fail(kName, detail::str("operand ", i, " (", in[i], ") is read as a broadcast with ",
                                       "inner size ", inner, ", which does not tile operand ", g,
                                       "'s ", n, " elements"));
    }
    out.insert(out.end(), program->outputs.size(), AVal{in[g].shape, dtype});
    if (program->row_reductions.empty()) continue;
    // Row reductions: the group's shape without its trailing row_axes axes.
    const std::vector<std::int64_t>& dims = in[g].shape.dims();
    if (in[g].shape.rank() < program->row_axes)
      rules::fail(kName, detail::str("the program reduces rows of ", program->row_axes,
                                     " trailing axes; operand ", g, " is ", in[g]));
    const Shape leading(std::vector<std::int64_t>(
        dims.begin(), dims.end() - static_cast<std::ptrdiff_t>(program->row_axes)));
    out.insert(out.end(), program->row_reductions.size(), AVal{leading, dtype});
  }
  return out;
}

}  // namespace

const ir::Primitive fused_elementwise_p(kName, shape_rule);

std::vector<Array> fused_elementwise(std::shared_ptr<const ir::ElementwiseProgram> program,
                                     std::span<const Array> scalars,
                                     std::span<const Array> inputs) {
  std::vector<Array> operands(scalars.begin(), scalars.end());
  operands.insert(operands.end(), inputs.begin(), inputs.end());
  return ir::bind(fused_elementwise_p, operands, {{"program", std::move(program)}});
}

std::vector<Array> fused_elementwise_donated(std::shared_ptr<const ir::ElementwiseProgram> program,
                                             std::span<const Array> scalars,
                                             std::vector<Array>&& inputs) {
  // The operands are this function's own: an input the caller moved in and holds nowhere
  // else is held by `operands` alone while the backend runs.
  std::vector<Array> operands(scalars.begin(), scalars.end());
  for (Array& x : inputs)
    operands.push_back(std::move(x));
  inputs.clear();
  return ir::bind(fused_elementwise_p, operands,
                  {{"donate", true}, {"program", std::move(program)}});
}

}  // namespace flaxpp::lax
