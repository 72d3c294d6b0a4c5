#include "transforms/remat_budget.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "flaxpp/ir/cost_model.hpp"
#include "flaxpp/ir/flops.hpp"
#include "flaxpp/ir/primitive_rules.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "transforms/region_policies.hpp"
#include "transforms/remat_values.hpp"

namespace flaxpp {

std::int64_t RematPlan::Region::kept_bytes() const {
  std::int64_t bytes = 0;
  for (const Kept& k : kept)
    bytes += k.bytes;
  return bytes;
}

double RematPlan::recompute_seconds() const {
  return std::max(0.0, modeled_seconds - keep_all_modeled_seconds);
}

std::string RematPlan::str() const {
  std::ostringstream os;
  os << "memory budget: " << budget_bytes << " bytes\n";
  for (std::size_t i = 0; i < regions.size(); ++i) {
    os << "  region " << i << ": " << regions[i].policy;
    if (!regions[i].same_as.empty()) os << " (keeps what " << regions[i].same_as << " keeps)";
    if (regions[i].own_policy != regions[i].policy)
      os << " (declared: " << regions[i].own_policy << ")";
    os << "\n    keeps " << regions[i].kept.size() << " values besides its inputs, "
       << regions[i].kept_bytes() << " bytes per run"
       << (regions[i].kept.empty() ? "" : " (each: what recomputing it costs)") << "\n";
    for (const RematPlan::Kept& k : regions[i].kept)
      os << "      " << k.primitive << (k.name.empty() ? "" : " '" + k.name + "'") << " " << k.aval
         << ": " << k.bytes << " bytes, " << k.flops << " FLOPs\n";
  }
  os << "planned peak: " << planned_peak_bytes << " bytes" << (exact ? "" : " (at least)")
     << " (keeping everything: " << keep_all_peak_bytes << " bytes, the least: " << least_peak_bytes
     << " bytes)\n"
     << "recomputed: " << recompute_flops
     << " FLOPs per step; modeled step: " << modeled_seconds * 1e3
     << " ms (keeping everything: " << keep_all_modeled_seconds * 1e3 << " ms)\n"
     << "search: " << candidates << " candidates planned in "
     << static_cast<std::int64_t>(search_seconds * 1000.0) << " ms";
  return os.str();
}

namespace transforms {
namespace {

using Policies = std::vector<PolicyPtr>;

// From keeping everything to keeping nothing.
const Policies& ladder() {
  namespace cp = checkpoint_policies;
  static const Policies steps = {cp::everything_saveable(), cp::dots_saveable(),
                                 cp::dots_with_no_batch_dims_saveable(), cp::nothing_saveable()};
  return steps;
}

std::string spelling(const PolicyPtr& p) {
  return p == nullptr ? checkpoint_policies::nothing_saveable()->str() : p->str();
}

// The candidates beyond the regions' own policies: every region at one step of the ladder, and
// the first k of them one step further down than the rest.
std::vector<Policies> candidates(std::size_t regions) {
  const Policies& steps = ladder();
  std::vector<Policies> out;
  for (const PolicyPtr& p : steps)
    out.emplace_back(regions, p);
  for (std::size_t s = 0; s + 1 < steps.size(); ++s)
    for (std::size_t k = 1; k < regions; ++k) {
      Policies mixed(regions, steps[s]);
      std::fill(mixed.begin(), mixed.begin() + static_cast<std::ptrdiff_t>(k), steps[s + 1]);
      out.push_back(std::move(mixed));
    }
  return out;
}

// The primitives of a region's body (inside the calls it flattens), ordered by the FLOPs that
// recomputing their results costs per byte those results hold, highest first: keeping the
// first k of them is a knapsack's greedy order (the most recomputation saved per byte first).
std::vector<std::string> kinds_by_value(const ir::Graph& body) {
  struct Kind {
    std::int64_t bytes = 0, flops = 0;
  };
  std::map<std::string, Kind> kinds;
  const std::function<void(const ir::Graph&)> visit = [&](const ir::Graph& g) {
    for (const ir::Eqn& e : g.eqns) {
      if (ir::call_body(*e.prim) != nullptr) {
        visit(ir::call_graph(e));
        continue;
      }
      Kind& k = kinds[e.prim->name()];
      for (const ir::VarId v : e.outputs)
        k.bytes += g.aval(v).nbytes();
      k.flops += ir::eqn_flops(g, e);
    }
  };
  visit(body);
  std::vector<std::pair<double, std::string>> ranked;
  for (const auto& [name, k] : kinds)
    if (k.bytes > 0)
      ranked.emplace_back(-static_cast<double>(k.flops) / static_cast<double>(k.bytes), name);
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> out;
  for (const auto& [value, name] : ranked)
    out.push_back(name);
  return out;
}

// Saves the results of the primitives named, recomputes the rest; spelled as the lambda a JAX
// program would pass as its policy.
PolicyPtr save_kinds(std::vector<std::string> names) {
  std::vector<std::string> quoted;
  for (const std::string& n : names)
    quoted.push_back("'" + n + "'");
  std::set<std::string> kept(names.begin(), names.end());
  return checkpoint_policies::custom(
      "lambda prim, *_, **__: prim.name in " + python_tuple(quoted),
      [kept = std::move(kept)](const ir::Primitive& p, std::span<const AVal>, const ir::Params&) {
        return kept.count(p.name()) != 0 ? ir::Decision::save() : ir::Decision::recompute();
      });
}

// Per region, keeping its k most valuable primitives' results, for every k between keeping
// nothing and keeping everything.
std::vector<PolicyPtr> kind_chain(const ir::Graph& body) {
  const std::vector<std::string> kinds = kinds_by_value(body);
  std::vector<PolicyPtr> chain;
  for (std::size_t k = 1; k < kinds.size(); ++k)
    chain.push_back(save_kinds({kinds.begin(), kinds.begin() + static_cast<std::ptrdiff_t>(k)}));
  return chain;
}

// One candidate per step of the regions' chains, regions alike at each step (a shorter chain at
// its last; a region without one keeps nothing).
std::vector<Policies> in_step(const std::vector<std::vector<PolicyPtr>>& chains) {
  std::size_t longest = 0;
  for (const auto& chain : chains)
    longest = std::max(longest, chain.size());
  std::vector<Policies> out;
  for (std::size_t j = 0; j < longest; ++j) {
    Policies c;
    for (const auto& chain : chains)
      c.push_back(chain.empty() ? checkpoint_policies::nothing_saveable()
                                : chain[std::min(j, chain.size() - 1)]);
    out.push_back(std::move(c));
  }
  return out;
}

struct Candidate {
  Policies policies;
  LoweredStep step;
  double seconds = 0;  // the step's modeled time
  std::int64_t flops = 0;
  std::vector<std::vector<RematPlan::Kept>> kept;  // per region
};

// The ladder's policy every region follows, if they all follow one.
std::optional<std::string> named_alike(const Policies& policies) {
  for (const PolicyPtr& p : ladder()) {
    const std::string name = p->str();
    if (!policies.empty() && std::all_of(policies.begin(), policies.end(), [&](const PolicyPtr& q) {
          return spelling(q) == name;
        }))
      return name;
  }
  return std::nullopt;
}

// Whether every region keeps everything (a step without regions does).
bool keeps_everything(const Policies& policies) {
  return policies.empty() || named_alike(policies) == ladder().front()->str();
}

// Whether `a` costs less than `b`: less modeled recomputation time (beyond the step that keeps
// everything, which takes `keep_all_seconds`), then keeping everything, then fewer FLOPs, then
// a smaller peak. A candidate modeled faster than keeping everything counts as recomputing
// nothing, so that a budget that fits everything keeps everything.
bool cheaper(const Candidate& a, const Candidate& b, double keep_all_seconds) {
  const double ra = std::max(0.0, a.seconds - keep_all_seconds);
  const double rb = std::max(0.0, b.seconds - keep_all_seconds);
  if (ra != rb) return ra < rb;
  const bool ka = keeps_everything(a.policies), kb = keeps_everything(b.policies);
  if (ka != kb) return ka;
  if (a.flops != b.flops) return a.flops < b.flops;
  return a.step.memory.peak_bytes < b.step.memory.peak_bytes;
}

}  // namespace

LoweredStep plan_remat(std::int64_t budget, const LowerStep& lower, const ir::CostModel& model,
                       RematPlan& plan) {
  const auto start = std::chrono::steady_clock::now();
  if (budget <= 0)
    throw ValueError(
        detail::str("jit: memory_budget must be a positive number of bytes, got ", budget));
  for (const double rate :
       {model.flops_per_second, model.transcendentals_per_second, model.bytes_per_second})
    if (!(rate > 0) || !std::isfinite(rate))
      throw ValueError(
          detail::str("jit: memory_budget: the cost model's rates must be positive "
                      "and finite, got ",
                      rate, "; use ir::CostModel::of(device kind)"));
  const auto model_cost = [&](Candidate& c) {
    c.seconds = ir::modeled_seconds(c.step.graph, model);
    c.flops = ir::flops(c.step.graph);
  };
  // The step as declared: its regions and their own policies.
  Candidate declared;
  std::vector<std::shared_ptr<const ir::Graph>> bodies;
  {
    RegionPolicies scope({}, model);
    declared.step = lower();
    declared.policies = scope.own();
    declared.kept = scope.kept();
    bodies = scope.bodies();
  }
  model_cost(declared);
  const Policies own = declared.policies;
  const std::size_t regions = own.size();

  // The best candidate that fits; of all, the least peak's plan and the keep-everything one's
  // cost, peak and values (what the report, the error and the value chains need, not their
  // graphs).
  std::optional<Candidate> best;
  std::optional<MemoryAnalysis> least;
  std::optional<Candidate> keep_all;
  std::vector<RegionValues> values;
  std::set<std::vector<std::string>> seen;  // candidates by their policies' spellings
  // What each named policy of the ladder keeps per region, when every region follows it.
  std::map<std::string, std::vector<std::vector<RematPlan::Kept>>> named_kept;
  const auto note_named = [&](const Candidate& c) {
    if (const std::optional<std::string> name = named_alike(c.policies)) named_kept[*name] = c.kept;
  };
  const auto fresh = [&](const Policies& policies) {
    std::vector<std::string> names;
    for (const PolicyPtr& p : policies)
      names.push_back(spelling(p));
    return seen.insert(std::move(names)).second;
  };
  const auto consider = [&](Candidate c) {
    const MemoryAnalysis& m = c.step.memory;
    if (keeps_everything(c.policies)) {
      keep_all.emplace();
      keep_all->seconds = c.seconds;
      keep_all->flops = c.flops;
      keep_all->step.memory = m;
    }
    if (!least || m.peak_bytes < least->peak_bytes) least = m;
    if (m.peak_bytes <= budget && (!best || cheaper(c, *best, keep_all->seconds)))
      best = std::move(c);
  };
  const auto plan_candidates = [&](std::vector<Policies> all) {
    for (Policies& policies : all) {
      if (!fresh(policies)) continue;  // the same decisions as one planned already
      Candidate c;
      {
        RegionPolicies scope(policies, model);
        c.step = lower();
        if (scope.own().size() != regions)
          throw ValueError(detail::str("jit: memory_budget: the function has ", regions,
                                       " checkpoint regions in one trace "
                                       "and ",
                                       scope.own().size(),
                                       " in another; a budget needs a function that traces the "
                                       "same way every time"));
        c.kept = scope.kept();
        if (keeps_everything(policies)) values = scope.values();
      }
      model_cost(c);
      c.policies = std::move(policies);
      note_named(c);
      consider(std::move(c));
    }
  };
  // Keeping everything first (the measure of recomputation, and the regions' values), then
  // the step as declared, the ladder, the primitive kinds and the value classes.
  plan_candidates({Policies(regions, ladder().front())});
  if (fresh(declared.policies)) {
    note_named(declared);
    consider(std::move(declared));
  }
  std::vector<std::vector<PolicyPtr>> kinds;
  for (const auto& body : bodies)
    kinds.push_back(kind_chain(*body));
  std::vector<Policies> all = candidates(regions);
  for (Policies& c : in_step(kinds))
    all.push_back(std::move(c));
  plan_candidates(std::move(all));
  std::vector<std::vector<PolicyPtr>> chains;
  for (const RegionValues& v : values)
    chains.push_back(value_chain(v));
  plan_candidates(in_step(chains));

  if (!best) {
    const MemoryAnalysis& m = *least;
    throw ValueError(detail::str(
        "jit: no remat choice fits the memory budget of ", budget,
        " bytes: the least planned "
        "peak is ",
        m.peak_bytes, " bytes",
        regions == 0 ? " (the step has no checkpoint regions to choose in: wrap its blocks in "
                       "remat/checkpoint)"
                     : "",
        ", of which the arguments (parameters, optimiser state, the batch) are ", m.argument_bytes,
        " bytes, the new results ", m.output_bytes - m.alias_bytes,
        " bytes, the temporaries at the peak ", m.temp_bytes, " bytes and the constants ",
        m.constant_bytes, " bytes; give a budget of at least ", m.peak_bytes,
        " bytes or a smaller batch"));
  }
  plan.budget_bytes = budget;
  plan.regions.clear();
  std::vector<NamedKept> named;  // in the ladder's order
  for (const PolicyPtr& p : ladder())
    if (const auto it = named_kept.find(p->str()); it != named_kept.end()) named.push_back(*it);
  for (std::size_t i = 0; i < regions; ++i)
    plan.regions.push_back({spelling(best->policies[i]), spelling(own[i]),
                            named_alike({best->policies[i]})
                                ? std::string()
                                : named_equivalent(best->kept[i], i, named),
                            best->kept[i]});
  plan.planned_peak_bytes = best->step.memory.peak_bytes;
  plan.exact = best->step.memory.exact;
  plan.recompute_flops = best->flops - keep_all->flops;
  plan.modeled_seconds = best->seconds;
  plan.keep_all_modeled_seconds = keep_all->seconds;
  plan.keep_all_peak_bytes = keep_all->step.memory.peak_bytes;
  plan.least_peak_bytes = least->peak_bytes;
  plan.candidates = seen.size();
  plan.search_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return std::move(best->step);
}

}  // namespace transforms
}  // namespace flaxpp
