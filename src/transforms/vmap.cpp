// vmap: the arguments' mapped axes moved to the front, the function traced for one example,
// its graph batched (transforms/batching.hpp), the results' batch axes moved where out_axes says.
#include "flaxpp/transforms/vmap.hpp"

#include "flaxpp/ir/primitive_rules.hpp"
#include "transforms/batching.hpp"

namespace flaxpp {
namespace {

// `axis` of an array of rank `rank` (negative counts from the end), or a ValueError naming
// `what`.
std::int64_t checked_axis(MapAxis axis, std::int64_t rank, const std::string& what) {
  const std::int64_t a = *axis < 0 ? *axis + rank : *axis;
  if (a < 0 || a >= rank)
    throw ValueError(detail::str("vmap: ", what, " has rank ", rank, ", so its axis ", *axis,
                                 " does not exist; give an axis in [", -rank, ", ", rank,
                                 ") or not_mapped"));
  return a;
}

}  // namespace

ArrayFn vmap(ArrayFn f, VmapOptions options) {
  return [f = std::move(f), options = std::move(options)](std::span<const Array> args) {
    std::vector<MapAxis> in_axes = options.in_axes;
    if (in_axes.empty()) in_axes.assign(args.size(), 0);
    if (in_axes.size() != args.size())
      throw ValueError(detail::str("vmap: in_axes has ", in_axes.size(), " entries for ",
                                   args.size(), " arguments; give one per argument"));
    std::optional<std::int64_t> size = options.axis_size;
    std::string sized_by = "axis_size";
    std::vector<Array> batch;
    std::vector<bool> batched;
    std::vector<AVal> example;
    for (std::size_t i = 0; i < args.size(); ++i) {
      const Array& x = args[i];
      if (!in_axes[i]) {
        batch.push_back(x);
        batched.push_back(false);
        example.push_back(x.aval());
        continue;
      }
      const std::string what = detail::str("argument ", i, " (", x.aval(), ")");
      const std::int64_t axis = checked_axis(in_axes[i], x.rank(), what);
      const std::int64_t n = x.shape()[axis];
      if (size && *size != n)
        throw ValueError(detail::str("vmap: the mapped axes must have one length, but ", sized_by,
                                     " gives ", *size, " and ", what, " has ", n,
                                     " along its axis ", axis));
      size = n;
      sized_by = what;
      batch.push_back(ir::move_axis(x, axis, 0));
      batched.push_back(true);
      std::vector<std::int64_t> dims = x.shape().dims();
      dims.erase(dims.begin() + axis);
      example.push_back({Shape(std::move(dims)), x.dtype()});
    }
    if (!size)
      throw ValueError(
          "vmap: no argument is mapped (every in_axes entry is not_mapped), so the "
          "number of examples is unknown; give axis_size");
    const ir::Graph graph = make_graph(f, example);
    ir::BatchedResults r = transforms::batch_eval(graph, std::move(batch), batched, *size);

    std::vector<MapAxis> out_axes = options.out_axes;
    if (out_axes.empty()) out_axes.assign(r.outputs.size(), 0);
    if (out_axes.size() == 1) out_axes.assign(r.outputs.size(), out_axes[0]);
    if (out_axes.size() != r.outputs.size())
      throw ValueError(detail::str("vmap: out_axes has ", out_axes.size(), " entries for ",
                                   r.outputs.size(),
                                   " results; give one per result, or one "
                                   "for all"));
    std::vector<Array> out;
    for (std::size_t k = 0; k < r.outputs.size(); ++k) {
      Array y = std::move(r.outputs[k]);
      if (!out_axes[k]) {
        if (r.batched[k])
          throw ValueError(detail::str("vmap: result ", k,
                                       " differs between examples, so its "
                                       "out_axes entry cannot be not_mapped; give it an axis"));
        out.push_back(std::move(y));
        continue;
      }
      y = ir::with_batch_axis(y, r.batched[k], *size);
      const std::int64_t axis =
          checked_axis(out_axes[k], y.rank(), detail::str("result ", k, " (", y.aval(), ")"));
      out.push_back(ir::move_axis(y, 0, axis));
    }
    return out;
  };
}

}  // namespace flaxpp
