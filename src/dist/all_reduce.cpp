// The all_reduce primitive: its shape rule, VJP rule and evaluation through dist::world().
#include "flaxpp/dist/all_reduce.hpp"

#include <string>

#include "flaxpp/core/error.hpp"

namespace flaxpp::dist {
namespace {

ReduceOp op_of(const ir::Params& params) {
  return reduce_op_from_name(params.get<std::string>("op"));
}

}  // namespace

const ir::Primitive all_reduce_p(
    "all_reduce",
    [](std::span<const AVal> in, const ir::Params& params) {
      if (in.size() != 1)
        throw ValueError(::flaxpp::detail::str("all_reduce takes one operand, got ", in.size()));
      const ReduceOp op = op_of(params);
      if (op == ReduceOp::mean && !is_floating(in[0].dtype))
        throw ValueError(::flaxpp::detail::str(
            "all_reduce(mean) of ", in[0], ": a mean needs a floating dtype; convert first"));
      return std::vector<AVal>{in[0]};
    },
    [](const ir::VjpArgs& a) -> std::vector<Array> {
      const ReduceOp op = op_of(a.params);
      if (op == ReduceOp::max)
        throw ValueError("all_reduce(max) has no gradient; reduce with sum or mean");
      if (!a.cotangents[0].valid()) return {Array()};
      return {all_reduce(a.cotangents[0], op)};
    },
    [](std::span<const Array> in, const ir::Params& params) {
      return std::vector<Array>{world().all_reduce(in[0], op_of(params))};
    });

Array all_reduce(const Array& x, ReduceOp op) {
  return ir::bind1(all_reduce_p, std::span<const Array>(&x, 1),
                   {{"op", std::string(reduce_op_name(op))}});
}

}  // namespace flaxpp::dist
