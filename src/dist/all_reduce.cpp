// The all_reduce primitive: its shape rule, VJP rule and evaluation through dist::world().
#include "flaxpp/dist/all_reduce.hpp"

#include <map>
#include <string>

#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/error.hpp"

namespace flaxpp::dist {
namespace {

ReduceOp op_of(const ir::Params& params) {
  return reduce_op_from_name(params.get<std::string>("op"));
}

ir::Params params_of(ReduceOp op) {
  // "collective": an equation that exchanges data between processes, which the graph passes
  // schedule as soon as its operands are final.
  return {{"op", std::string(reduce_op_name(op))}, {"collective", true}};
}

// The reductions of `in`, one collective per dtype and device: the arrays of each are packed
// into one flat buffer (a bucket), reduced, and unpacked into arrays of their own.
std::vector<Array> reduce_packed(std::span<const Array> in, ReduceOp op) {
  std::vector<Array> out(in.size());
  std::map<std::pair<DType, std::string>, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < in.size(); ++i)
    groups[{in[i].dtype(), in[i].device().str()}].push_back(i);
  for (const auto& [key, members] : groups) {
    if (members.size() == 1) {
      out[members[0]] = world().all_reduce(in[members[0]], op);
      continue;
    }
    Backend& be = in[members[0]].buffer().backend();
    std::int64_t elements = 0, bytes = 0;
    for (const std::size_t i : members) {
      elements += in[i].size();
      bytes += in[i].nbytes();
    }
    std::shared_ptr<Buffer> flat = be.allocate(bytes);
    std::int64_t offset = 0;
    for (const std::size_t i : members) {
      be.copy(in[i].buffer(), 0, *flat, offset, in[i].nbytes());
      offset += in[i].nbytes();
    }
    const Array reduced =
        world().all_reduce(Array(std::move(flat), Shape{elements}, key.first), op);
    offset = 0;
    for (const std::size_t i : members) {
      std::shared_ptr<Buffer> own = be.allocate(in[i].nbytes());
      be.copy(reduced.buffer(), offset, *own, 0, in[i].nbytes());
      out[i] = Array(std::move(own), in[i].shape(), in[i].dtype());
      offset += in[i].nbytes();
    }
  }
  return out;
}

}  // namespace

const ir::Primitive all_reduce_p(
    "all_reduce",
    [](std::span<const AVal> in, const ir::Params& params) {
      if (in.empty()) throw ValueError("all_reduce takes one operand or more, got none");
      const ReduceOp op = op_of(params);
      for (const AVal& a : in)
        if (op == ReduceOp::mean && !is_floating(a.dtype))
          throw ValueError(::flaxpp::detail::str(
              "all_reduce(mean) of ", a, ": a mean needs a floating dtype; convert first"));
      return std::vector<AVal>(in.begin(), in.end());
    },
    [](const ir::VjpArgs& a) -> std::vector<Array> {
      const ReduceOp op = op_of(a.params);
      if (op == ReduceOp::max)
        throw ValueError("all_reduce(max) has no gradient; reduce with sum or mean");
      // The cotangents that exist, reduced together; the others stay zero.
      std::vector<Array> cts;
      for (const Array& ct : a.cotangents)
        if (ct.valid()) cts.push_back(ct);
      std::vector<Array> out(a.cotangents.size());
      if (cts.empty()) return out;
      const std::vector<Array> reduced = all_reduce(cts, op);
      std::size_t next = 0;
      for (std::size_t i = 0; i < out.size(); ++i)
        if (a.cotangents[i].valid()) out[i] = reduced[next++];
      return out;
    },
    [](std::span<const Array> in, const ir::Params& params) {
      return reduce_packed(in, op_of(params));
    });

Array all_reduce(const Array& x, ReduceOp op) {
  return ir::bind1(all_reduce_p, std::span<const Array>(&x, 1), params_of(op));
}

std::vector<Array> all_reduce(std::span<const Array> xs, ReduceOp op) {
  if (xs.empty()) return {};
  return ir::bind(all_reduce_p, xs, params_of(op));
}

}  // namespace flaxpp::dist
