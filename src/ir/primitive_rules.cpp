// The registries of flaxpp/ir/primitive_rules.hpp: effects and calls, keyed by primitive.
#include "flaxpp/ir/primitive_rules.hpp"

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

void register_body(std::unordered_map<const Primitive*, std::string> Registry::*table,
                   const Primitive& prim, std::string body) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  (r.*table)[&prim] = std::move(body);
}

const std::string* body_param(std::unordered_map<const Primitive*, std::string> Registry::*table,
                              const Primitive& prim) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const auto it = (r.*table).find(&prim);
  return it == (r.*table).end() ? nullptr : &it->second;
}

}  // namespace

void register_call(const Primitive& prim, std::string body) {
  register_body(&Registry::calls, prim, std::move(body));
}

const std::string* call_body(const Primitive& prim) {
  return body_param(&Registry::calls, prim);
}

void register_loop(const Primitive& prim, std::string body) {
  register_body(&Registry::loops, prim, std::move(body));
}

const std::string* loop_body(const Primitive& prim) {
  return body_param(&Registry::loops, prim);
}

const Graph& call_graph(const Eqn& e) {
  const std::string* body = call_body(*e.prim);
  FLAXPP_ASSERT(body != nullptr, e.prim->name(), " is not a call");
  return *e.params.get<std::shared_ptr<const Graph>>(*body);
}

}  // namespace flaxpp::ir
