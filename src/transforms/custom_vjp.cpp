// custom_vjp_call: a traced forward body with a registered VJP rule.
#include "flaxpp/transforms/custom_vjp.hpp"

#include <map>
#include <mutex>

#include "flaxpp/ir/primitive_rules.hpp"
#include "transforms/batching.hpp"

namespace flaxpp {
namespace {
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, const CustomVjpRule*>& registry() {
  static auto* r = new std::map<std::string, const CustomVjpRule*>();
  return *r;
}
const ir::Graph& body(const ir::Params& params) {
  return *params.get<std::shared_ptr<const ir::Graph>>("call");
}
}  // namespace

CustomVjpRule::CustomVjpRule(std::string name, ir::Primitive::VjpRule rule)
    : name_(std::move(name)), rule_(std::move(rule)) {
  std::lock_guard lock(registry_mutex());
  if (!registry().emplace(name_, this).second)
    throw ValueError(
        detail::str("a custom VJP rule named \"", name_,
                    "\" already exists; give each rule a unique name "
                    "and keep it alive as long as graphs that use it (e.g. as a static)"));
}

CustomVjpRule::~CustomVjpRule() {
  std::lock_guard lock(registry_mutex());
  registry().erase(name_);
}

const CustomVjpRule& CustomVjpRule::find(const std::string& name) {
  std::lock_guard lock(registry_mutex());
  const auto it = registry().find(name);
  if (it == registry().end())
    throw ValueError(detail::str("the custom VJP rule \"", name,
                                 "\" no longer exists; a rule must outlive the graphs "
                                 "that use it (declare it static)"));
  return *it->second;
}

std::vector<Array> custom_vjp_rule_apply(const ir::VjpArgs& args) {
  return CustomVjpRule::find(args.params.get<std::string>("rule")).rule_(args);
}

const ir::Primitive custom_vjp_call_p(
    "custom_vjp_call",
    [](std::span<const AVal> in, const ir::Params& params) {
      const ir::Graph& g = body(params);
      FLAXPP_ASSERT(in.size() == g.invars.size(), "custom_vjp_call arity");
      std::vector<AVal> out;
      for (const ir::Atom& a : g.outvars)
        out.push_back(g.aval(a));
      return out;
    },
    custom_vjp_rule_apply,
    [](std::span<const Array> inputs, const ir::Params& params) {
      return eval_graph(body(params), inputs);
    });

namespace {

// Batched, the call is its primal function batched, with the same rule: the rule then receives
// the batch (every operand and result given the batch axis, first), which rules written
// elementwise, as relu's, treat as they treat one example.
ir::BatchedResults custom_vjp_call_batched(const ir::BatchArgs& a) {
  std::vector<Array> inputs;
  std::vector<bool> batched(a.inputs.size(), true);
  for (std::size_t i = 0; i < a.inputs.size(); ++i)
    inputs.push_back(ir::with_batch_axis(a.inputs[i], a.batched[i], a.size));
  transforms::BatchedGraph b = transforms::batch_graph(
      body(a.params), batched, a.size, std::vector<bool>(body(a.params).outvars.size(), true));
  if (!b.consts.empty())
    throw ValueError(
        detail::str("vmap of custom_vjp_call (rule \"", a.params.get<std::string>("rule"),
                    "\"): its batched primal function captures ", b.consts.size(),
                    " values, which the rule's operands cannot carry; pass them as inputs"));
  ir::Params params = a.params;
  params.set("call", std::make_shared<const ir::Graph>(std::move(b.graph)));
  return {ir::bind(a.prim, inputs, params), std::move(b.out_batched)};
}

// A call of the primal function: jit inlines it once the step is differentiated.
const bool custom_vjp_call_rules_registered = [] {
  ir::register_call(custom_vjp_call_p, "call");
  ir::register_batching(custom_vjp_call_p, custom_vjp_call_batched);
  return true;
}();

}  // namespace

std::vector<Array> custom_vjp_call(const CustomVjpRule& rule, const ArrayFn& forward,
                                   std::span<const Array> inputs, const ir::Params& static_params) {
  std::vector<AVal> avals;
  for (const Array& x : inputs)
    avals.push_back(x.aval());
  ir::Params params = static_params;
  params.set("call", std::make_shared<const ir::Graph>(make_graph(forward, avals)));
  params.set("rule", rule.name());
  return ir::bind(custom_vjp_call_p, inputs, params);
}

}  // namespace flaxpp
