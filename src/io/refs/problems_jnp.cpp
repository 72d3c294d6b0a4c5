// Reference problems of the jnp/lax surface (docs/refs-problems.md, "The jnp/lax surface"):
// array_op (one jax.numpy or jax.lax function, its value and its operands' cotangents) and the
// contract's random.categorical.
#include <functional>
#include <map>

#include "flaxpp/io/refs.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/ops/sampling.hpp"
#include "flaxpp/ops/slicing.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/trace.hpp"
#include "io/refs/case_budget.hpp"

namespace flaxpp::refs {
namespace {

using Axes = std::vector<std::int64_t>;

// One op of array_op: its operand names (those past `required` optional), its static
// arguments, and its function of the operands and the case's inputs; the first result is the
// value, any others are expected under the names in `extra`.
struct Op {
  std::vector<std::string> operands;
  std::size_t required;
  std::vector<std::string> args;
  std::function<Array(std::span<const Array>, const Inputs&, Device)> fn;
  std::vector<std::string> extra{};
  std::function<std::vector<Array>(std::span<const Array>, const Inputs&, Device)> extra_fn{};
};

// An int list input as 0-d int32 arrays on `device` (dynamic_slice's start indices).
std::vector<Array> index_arrays(const Inputs& in, const char* key, Device device) {
  std::vector<Array> out;
  for (const std::int64_t i : in.int_list(key)) {
    if (i < INT32_MIN || i > INT32_MAX)
      throw InputError(detail::str(in.path(), ".", key, ": ", i, " is outside int32"));
    out.push_back(Array::scalar(static_cast<std::int32_t>(i), device));
  }
  return out;
}

std::optional<std::int64_t> optional_int(const Json& v) {
  if (v.is_null()) return std::nullopt;
  return v.get<std::int64_t>();
}

// jnp.index's "ranges": [start, stop, step] per axis, each an int or null.
std::vector<Range> ranges_input(const Inputs& in) {
  const Json& raw = in.raw("ranges");
  std::vector<Range> ranges;
  try {
    for (const Json& r : raw) {
      if (!r.is_array() || r.size() != 3) throw std::invalid_argument("not a triple");
      ranges.push_back({optional_int(r[0]), optional_int(r[1]), optional_int(r[2]).value_or(1)});
    }
  } catch (const std::exception&) {
    throw InputError(detail::str(in.path(),
                                 ".ranges: expected a list of [start, stop, step] "
                                 "(each an integer or null), got ",
                                 raw.dump()));
  }
  return ranges;
}

std::vector<lax::PadConfig> padding_input(const Inputs& in, const char* key, std::size_t width) {
  const Json& raw = in.raw(key);
  std::vector<lax::PadConfig> config;
  try {
    for (const Json& c : raw) {
      if (!c.is_array() || c.size() != width) throw std::invalid_argument("bad width");
      config.push_back({c[0].get<std::int64_t>(), c[1].get<std::int64_t>(),
                        width == 3 ? c[2].get<std::int64_t>() : 0});
    }
  } catch (const std::exception&) {
    throw InputError(detail::str(in.path(), ".", key, ": expected a list of ", width,
                                 "-integer lists, one per axis, got ", raw.dump()));
  }
  return config;
}

std::optional<double> optional_number(const Inputs& in, const char* key) {
  if (!in.has(key)) return std::nullopt;
  return in.number(key);
}

std::optional<std::int64_t> optional_axis(const Inputs& in) {
  if (!in.has("axis")) return std::nullopt;
  return in.integer("axis");
}

const std::map<std::string, Op, std::less<>>& ops() {
  using A = std::span<const Array>;
  static const std::map<std::string, Op, std::less<>> table = {
      {"lax.slice",
       {{"x"},
        1,
        {"start_indices", "limit_indices", "strides"},
        [](A a, const Inputs& in, Device) {
          return lax::slice(a[0], in.int_list("start_indices"), in.int_list("limit_indices"),
                            in.has("strides") ? in.int_list("strides") : Axes{});
        }}},
      {"jnp.index",
       {{"x"},
        1,
        {"ranges"},
        [](A a, const Inputs& in, Device) { return slice(a[0], ranges_input(in)); }}},
      {"lax.rev",
       {{"x"},
        1,
        {"dimensions"},
        [](A a, const Inputs& in, Device) { return lax::rev(a[0], in.int_list("dimensions")); }}},
      {"lax.pad",
       {{"x", "y"},
        2,
        {"padding_config"},
        [](A a, const Inputs& in, Device) {
          return lax::pad(a[0], a[1], padding_input(in, "padding_config", 3));
        }}},
      {"jnp.pad",
       {{"x"},
        1,
        {"pad_width", "value"},
        [](A a, const Inputs& in, Device) {
          std::vector<std::pair<std::int64_t, std::int64_t>> widths;
          for (const lax::PadConfig& c : padding_input(in, "pad_width", 2))
            widths.emplace_back(c.low, c.high);
          return pad(a[0], widths, in.number("value", 0.0));
        }}},
      {"jnp.concatenate",
       {{"x", "y", "z"},
        1,
        {"axis"},
        [](A a, const Inputs& in, Device) { return concatenate(a, in.integer("axis")); }}},
      {"jnp.stack",
       {{"x", "y", "z"},
        1,
        {"axis"},
        [](A a, const Inputs& in, Device) { return stack(a, in.integer("axis")); }}},
      {"jnp.clip",
       {{"x"},
        1,
        {"min", "max"},
        [](A a, const Inputs& in, Device) {
          return clip(a[0], optional_number(in, "min"), optional_number(in, "max"));
        }}},
      {"lax.cumsum",
       {{"x"},
        1,
        {"axis", "reverse"},
        [](A a, const Inputs& in, Device) {
          return lax::cumsum(a[0], in.integer("axis"), in.boolean("reverse", false));
        }}},
      {"jnp.cumsum",
       {{"x"},
        1,
        {"axis"},
        [](A a, const Inputs& in, Device) { return cumsum(a[0], optional_axis(in)); }}},
      {"jnp.argmax",
       {{"x"},
        1,
        {"axis", "keepdims"},
        [](A a, const Inputs& in, Device) {
          return argmax(a[0], optional_axis(in), in.boolean("keepdims", false));
        }}},
      {"jnp.argmin",
       {{"x"},
        1,
        {"axis", "keepdims"},
        [](A a, const Inputs& in, Device) {
          return argmin(a[0], optional_axis(in), in.boolean("keepdims", false));
        }}},
      {"lax.dynamic_slice",
       {{"x"},
        1,
        {"start_indices", "slice_sizes"},
        [](A a, const Inputs& in, Device device) {
          return lax::dynamic_slice(a[0], index_arrays(in, "start_indices", device),
                                    in.int_list("slice_sizes"));
        }}},
      {"lax.dynamic_update_slice",
       {{"x", "y"},
        2,
        {"start_indices"},
        [](A a, const Inputs& in, Device device) {
          return lax::dynamic_update_slice(a[0], a[1], index_arrays(in, "start_indices", device));
        }}},
      {"jnp.sort",
       {{"x"},
        1,
        {"axis"},
        [](A a, const Inputs& in, Device) { return sort(a[0], in.integer("axis", -1)); }}},
      {"jnp.argsort",
       {{"x"},
        1,
        {"axis", "descending"},
        [](A a, const Inputs& in, Device) {
          return argsort(a[0], in.integer("axis", -1), in.boolean("descending", false));
        }}},
      {"lax.top_k",
       {{"x"},
        1,
        {"k"},
        [](A a, const Inputs& in, Device) { return lax::top_k(a[0], in.integer("k")).first; },
        {"indices"},
        [](A a, const Inputs& in, Device) {
          return std::vector<Array>{lax::top_k(a[0], in.integer("k")).second};
        }}},
      {"jax.nn.one_hot",
       {{"x"},
        1,
        {"num_classes"},
        [](A a, const Inputs& in, Device) { return one_hot(a[0], in.integer("num_classes")); }}},
  };
  return table;
}

const Op& op_input(const Inputs& in) {
  const std::string name = in.string("op");
  const auto it = ops().find(name);
  if (it != ops().end()) return it->second;
  std::string known;
  for (const auto& [n, op] : ops())
    known += (known.empty() ? "" : ", ") + n;
  throw InputError(
      detail::str(in.path(), ".op: unknown op \"", name, "\"; expected one of ", known));
}

Outcome array_op(const Inputs& in, const CaseContext& cx) {
  const Op& op = op_input(in);
  std::vector<std::string_view> accepted{"op", "ct"};
  for (const std::string& n : op.operands)
    accepted.push_back(n);
  for (const std::string& n : op.args)
    accepted.push_back(n);
  in.expect_only(accepted, in.string("op"));
  std::vector<Array> operands;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < op.operands.size(); ++i) {
    if (!in.has(op.operands[i])) {
      if (i < op.required)
        throw InputError(
            detail::str(in.path(), ": ", in.string("op"), " needs operand ", op.operands[i]));
      break;
    }
    operands.push_back(in.array(op.operands[i]).to(cx.device));
    names.push_back(op.operands[i]);
  }
  const ArrayFn fn = [&](std::span<const Array> a) {
    return std::vector<Array>{op.fn(a, in, cx.device)};
  };
  // The function traced first: its shape rules check the arguments, and every value it makes,
  // about three times over with the VJP's, must fit before anything is computed.
  std::vector<AVal> avals;
  for (const Array& a : operands)
    avals.push_back(a.aval());
  const ir::Graph graph = make_graph(fn, avals);
  double bytes = 0;
  for (std::size_t v = 0; v < graph.num_vars(); ++v) {
    const AVal& aval = graph.aval(static_cast<ir::VarId>(v));
    bytes += static_cast<double>(aval.shape.size()) * static_cast<double>(itemsize(aval.dtype));
  }
  check_case_memory(3 * bytes, in.path() + ".op", detail::str(in.string("op"), " of these sizes"));
  bool floating = true;
  for (const Array& a : operands)
    floating = floating && is_floating(a.dtype());
  Tree out;
  if (op.extra_fn) {
    const std::vector<Array> extra = op.extra_fn(operands, in, cx.device);
    for (std::size_t i = 0; i < extra.size(); ++i)
      out.set(op.extra[i], extra[i]);
  }
  if (!floating || !in.has("ct")) {
    out.set("value", fn(operands)[0]);
    return out;
  }
  const VjpResult r = vjp(fn, operands);
  const Array ct = in.array("ct").to(cx.device);
  if (ct.aval() != r.outputs[0].aval())
    throw InputError(detail::str(in.path(), ".ct: expected the value's aval ", r.outputs[0].aval(),
                                 ", got ", ct.aval()));
  const std::vector<Array> grads = r.backward(std::span<const Array>(&ct, 1));
  out.set("value", r.outputs[0]);
  for (std::size_t i = 0; i < names.size(); ++i)
    out.set(names[i], grads[i]);
  return out;
}

}  // namespace

void register_jnp_problems(ProblemRegistry& registry) {
  registry.add("array_op", array_op);
  registry.add("random.categorical", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    in.expect_only({"key", "logits", "axis", "shape"}, "random.categorical");
    const Array logits = in.array("logits");
    if (logits.dtype() != DType::f32 || logits.rank() == 0)
      throw InputError(
          detail::str(in.path(), ".logits: expected float32 of rank >= 1, got ", logits.aval()));
    std::optional<Shape> shape;
    if (in.has("shape")) shape = in.shape("shape");
    return Tree(random::categorical(in.key("key", cx.mode), logits.to(cx.device),
                                    in.integer("axis", -1), shape));
  });
}

}  // namespace flaxpp::refs
