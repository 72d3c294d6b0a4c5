// The registries of flaxpp/ir/primitive_rules.hpp: effects, calls, loops, batching and FLOPs
// rules, keyed by primitive.
#include "flaxpp/ir/primitive_rules.hpp"

#include "flaxpp/ir/lax.hpp"

#include <mutex>
#include <unordered_map>

namespace flaxpp::ir {
namespace {

// Registrations happen in static initialisers, lookups afterwards; the lock keeps a late
// registration (a primitive defined in a plug-in) safe beside running passes.
struct Registry {
  std::mutex mutex;
  std::unordered_map<const Primitive*, Effects> effects;
  std::unordered_map<const Primitive*, std::string> calls, loops;
  std::unordered_map<const Primitive*, LoopTrips> trips;
  std::unordered_map<const Primitive*, BatchRule> batching;
  std::unordered_map<const Primitive*, FlopsRule> flops;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_effects(const Primitive& prim, Effects effects) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.effects[&prim] = effects;
}

const Effects& effects_of(const Primitive& prim) {
  static const Effects kPure;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const auto it = r.effects.find(&prim);
  return it == r.effects.end() ? kPure : it->second;
}

namespace {

// One registry's table: the rule of `prim` set, and found (nullptr where it has none).
template <class Rule>
void register_rule(std::unordered_map<const Primitive*, Rule> Registry::*table,
                   const Primitive& prim, Rule rule) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  (r.*table)[&prim] = std::move(rule);
}

template <class Rule>
const Rule* find_rule(std::unordered_map<const Primitive*, Rule> Registry::*table,
                      const Primitive& prim) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const auto it = (r.*table).find(&prim);
  return it == (r.*table).end() ? nullptr : &it->second;
}

}  // namespace

void register_call(const Primitive& prim, std::string body) {
  register_rule(&Registry::calls, prim, std::move(body));
}

const std::string* call_body(const Primitive& prim) {
  return find_rule(&Registry::calls, prim);
}

void register_loop(const Primitive& prim, std::string body, LoopTrips trips) {
  register_rule(&Registry::loops, prim, std::move(body));
  if (trips) register_rule(&Registry::trips, prim, std::move(trips));
}

const std::string* loop_body(const Primitive& prim) {
  return find_rule(&Registry::loops, prim);
}

std::optional<std::int64_t> loop_trips(const Eqn& e) {
  LoopTrips trips;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    const auto it = r.trips.find(e.prim);
    if (it == r.trips.end()) return std::nullopt;
    trips = it->second;
  }
  return trips(e);
}

void register_batching(const Primitive& prim, BatchRule rule) {
  register_rule(&Registry::batching, prim, std::move(rule));
}

const BatchRule* batching_rule(const Primitive& prim) {
  return find_rule(&Registry::batching, prim);
}

void register_flops(const Primitive& prim, FlopsRule rule) {
  register_rule(&Registry::flops, prim, std::move(rule));
}

const FlopsRule* flops_rule(const Primitive& prim) {
  return find_rule(&Registry::flops, prim);
}

Array with_batch_axis(const Array& x, bool batched, std::int64_t size) {
  if (batched) return x;
  std::vector<std::int64_t> dims{size}, axes;
  for (std::int64_t i = 0; i < x.rank(); ++i) {
    dims.push_back(x.shape()[i]);
    axes.push_back(i + 1);
  }
  return lax::broadcast_in_dim(x, Shape(std::move(dims)), std::move(axes));
}

Array move_axis(const Array& x, std::int64_t from, std::int64_t to) {
  if (from == to) return x;
  std::vector<std::int64_t> perm;
  for (std::int64_t i = 0; i < x.rank(); ++i)
    if (i != from) perm.push_back(i);
  perm.insert(perm.begin() + to, from);
  return lax::transpose(x, std::move(perm));
}

const Graph& call_graph(const Eqn& e) {
  const std::string* body = call_body(*e.prim);
  FLAXPP_ASSERT(body != nullptr, e.prim->name(), " is not a call");
  return *e.params.get<std::shared_ptr<const Graph>>(*body);
}

}  // namespace flaxpp::ir
