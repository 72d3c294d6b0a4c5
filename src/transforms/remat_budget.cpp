#include "transforms/remat_budget.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "flaxpp/ir/flops.hpp"
#include "flaxpp/ir/primitive_rules.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "transforms/region_policies.hpp"

namespace flaxpp {

std::int64_t RematPlan::Region::kept_bytes() const {
  std::int64_t bytes = 0;
  for (const Kept& k : kept)
    bytes += k.bytes;
  return bytes;
}

std::string RematPlan::str() const {
  std::ostringstream os;
  os << "memory budget: " << budget_bytes << " bytes\n";
  for (std::size_t i = 0; i < regions.size(); ++i) {
    os << "  region " << i << ": " << regions[i].policy;
    if (regions[i].own_policy != regions[i].policy)
      os << " (declared: " << regions[i].own_policy << ")";
    os << "\n    keeps " << regions[i].kept.size() << " values besides its inputs, "
       << regions[i].kept_bytes() << " bytes per run"
       << (regions[i].kept.empty() ? "" : " (each: what recomputing it costs)") << "\n";
    for (const RematPlan::Kept& k : regions[i].kept)
      os << "      " << k.primitive << " " << k.aval << ": " << k.bytes << " bytes, " << k.flops
         << " FLOPs\n";
  }
  os << "planned peak: " << planned_peak_bytes << " bytes" << (exact ? "" : " (at least)")
     << " (keeping everything: " << keep_all_peak_bytes << " bytes, the least: " << least_peak_bytes
     << " bytes)\n"
     << "recomputed: " << recompute_flops << " FLOPs per step\n"
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
  std::string tuple;
  for (const std::string& n : names)
    tuple += (tuple.empty() ? "'" : ", '") + n + "'";
  if (names.size() == 1) tuple += ",";
  std::set<std::string> kept(names.begin(), names.end());
  return checkpoint_policies::custom(
      detail::str("lambda prim, *_, **__: prim.name in (", tuple, ")"),
      [kept = std::move(kept)](const ir::Primitive& p, std::span<const AVal>, const ir::Params&) {
        return kept.count(p.name()) != 0 ? ir::Decision::save() : ir::Decision::recompute();
      });
}

// Per region, keeping its k most valuable primitives' results, for every k between keeping
// nothing and keeping everything; regions alike at each step (a shorter chain at its last).
std::vector<Policies> kind_candidates(const std::vector<std::shared_ptr<const ir::Graph>>& bodies) {
  std::vector<std::vector<PolicyPtr>> chains;
  std::size_t longest = 0;
  for (const auto& body : bodies) {
    const std::vector<std::string> kinds = kinds_by_value(*body);
    std::vector<PolicyPtr> chain;
    for (std::size_t k = 1; k < kinds.size(); ++k)
      chain.push_back(save_kinds({kinds.begin(), kinds.begin() + static_cast<std::ptrdiff_t>(k)}));
    longest = std::max(longest, chain.size());
    chains.push_back(std::move(chain));
  }
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
  std::int64_t flops = 0;
  std::vector<std::vector<RematPlan::Kept>> kept;  // per region
};

// Whether `a` costs less than `b`: less recomputation, then a smaller peak.
bool cheaper(const Candidate& a, const Candidate& b) {
  if (a.flops != b.flops) return a.flops < b.flops;
  return a.step.memory.peak_bytes < b.step.memory.peak_bytes;
}

}  // namespace

LoweredStep plan_remat(std::int64_t budget, const LowerStep& lower, RematPlan& plan) {
  const auto start = std::chrono::steady_clock::now();
  if (budget <= 0)
    throw ValueError(
        detail::str("jit: memory_budget must be a positive number of bytes, got ", budget));
  // The step as declared: its regions and their own policies.
  Candidate declared;
  std::vector<std::shared_ptr<const ir::Graph>> bodies;
  {
    RegionPolicies scope({});
    declared.step = lower();
    declared.policies = scope.own();
    declared.kept = scope.kept();
    bodies = scope.bodies();
  }
  declared.flops = ir::flops(declared.step.graph);
  const Policies own = declared.policies;
  const std::size_t regions = own.size();

  // The best candidate that fits; of all, the least peak's plan and the keep-everything one's
  // cost and peak (what the report and the error need, not their graphs).
  std::optional<Candidate> best;
  std::optional<MemoryAnalysis> least;
  std::optional<std::int64_t> keep_all_flops;
  std::int64_t keep_all_peak = 0;
  std::set<std::vector<std::string>> seen;  // candidates by their policies' spellings
  const auto fresh = [&](const Policies& policies) {
    std::vector<std::string> names;
    for (const PolicyPtr& p : policies)
      names.push_back(spelling(p));
    return seen.insert(std::move(names)).second;
  };
  const auto consider = [&](Candidate c) {
    const MemoryAnalysis& m = c.step.memory;
    const bool keeps_all =
        std::all_of(c.policies.begin(), c.policies.end(),
                    [](const PolicyPtr& p) { return spelling(p) == ladder().front()->str(); });
    if (keeps_all) {
      keep_all_flops = c.flops;
      keep_all_peak = m.peak_bytes;
    }
    if (!least || m.peak_bytes < least->peak_bytes) least = m;
    if (m.peak_bytes <= budget && (!best || cheaper(c, *best))) best = std::move(c);
  };
  fresh(declared.policies);
  consider(std::move(declared));
  std::vector<Policies> all = candidates(regions);
  for (Policies& c : kind_candidates(bodies))
    all.push_back(std::move(c));
  for (Policies& policies : all) {
    if (!fresh(policies)) continue;  // the same decisions as one planned already
    Candidate c;
    {
      RegionPolicies scope(policies);
      c.step = lower();
      if (scope.own().size() != regions)
        throw ValueError(detail::str("jit: memory_budget: the function has ", regions,
                                     " checkpoint regions in one trace "
                                     "and ",
                                     scope.own().size(),
                                     " in another; a budget needs a function that traces the "
                                     "same way every time"));
      c.kept = scope.kept();
    }
    c.flops = ir::flops(c.step.graph);
    c.policies = std::move(policies);
    consider(std::move(c));
  }

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
  for (std::size_t i = 0; i < regions; ++i)
    plan.regions.push_back({spelling(best->policies[i]), spelling(own[i]), best->kept[i]});
  plan.planned_peak_bytes = best->step.memory.peak_bytes;
  plan.exact = best->step.memory.exact;
  plan.recompute_flops = best->flops - keep_all_flops.value_or(best->flops);
  plan.keep_all_peak_bytes = keep_all_peak;
  plan.least_peak_bytes = least->peak_bytes;
  plan.candidates = seen.size();
  plan.search_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return std::move(best->step);
}

}  // namespace transforms
}  // namespace flaxpp
