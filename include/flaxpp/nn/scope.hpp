// flaxpp/nn/scope.hpp — Scope: what a Flax linen module sees while it runs. Parameters are
// created by name (init) or looked up (apply) at the module's path; rng streams derive keys
// exactly as Flax does (SHA-1 of the path and a per-scope counter, then fold_in; semantics
// doc §3); child modules are auto-named per class (Dense_0, Dense_1, ...) or named explicitly.
// The Scope is passed explicitly: no hidden thread-local module context.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/tree.hpp"
#include "flaxpp/random/initializers.hpp"
#include "flaxpp/random/key.hpp"

namespace flaxpp::nn {

// {collection: {module path...: {name: Array}}}, e.g. {"params": {"Dense_0": {"kernel": ...}}}.
using Variables = Tree;
// Base keys of the rng streams, by stream name ("params", "dropout", ...).
using RngStreams = std::map<std::string, random::Key>;

// A linen module's class: it names itself, as Flax names a module's instances after its class
// (Dense_0), with `static constexpr const char* name = "Dense";` (or, for lifted modules,
// `static std::string class_name()`), and runs as operator()(nn::Scope&, inputs...).
template <class M>
concept NamedModule = requires { std::string(M::name); } || requires { std::string(M::class_name()); };

// A module's class name, which names its auto-named instances: M::class_name() when M
// defines it (lifted modules do), else M::name.
template <class M>
std::string module_name() {
  static_assert(NamedModule<M>,
                "flaxpp: this module type has no name: declare `static constexpr const char* name "
                "= \"MyModule\";` in it (Flax names its instances after their class: MyModule_0)");
  if constexpr (requires { M::class_name(); }) {
    return M::class_name();
  } else if constexpr (NamedModule<M>) {
    return M::name;
  } else {
    return {};
  }
}

// The class name `module` is auto-named after: module.instance_class_name() where M defines it
// (a lifted module whose transform may be switched off by a value, as nn::remat by
// checkpoint_policies::none()), else M's.
template <class M>
std::string module_name_of(const M& module) {
  if constexpr (requires { module.instance_class_name(); }) {
    return module.instance_class_name();
  } else {
    return module_name<M>();
  }
}

// Whether a module of type M runs on these inputs: operator()(nn::Scope&, Args...) const.
template <class M, class... Args>
inline constexpr bool module_callable_v = std::is_invocable_v<const M&, class Scope&, Args...>;

// Flax's _fold_in_static: fold_in(base, first 4 bytes of SHA-1(path..., counter)) with the
// counter as minimal big-endian bytes (flax_fix_rng_separator off: no separators).
random::Key fold_in_static(const random::Key& base, const std::vector<std::string>& path,
                           std::uint32_t counter);

class Scope;
namespace internal {
struct ScopeState;
Scope make_root_scope(std::shared_ptr<ScopeState> state);
// For lifted transforms (nn/scan.cpp): a scope at `path` over `state`, and a scope's state.
Scope scope_at(std::shared_ptr<ScopeState> state, std::vector<std::string> path);
const std::shared_ptr<ScopeState>& state_of(const Scope& scope);
}  // namespace internal

class Scope {
 public:
  // A parameter of this module: created with `init` (which draws one 'params' key, as Flax does
  // even for initialisers that ignore it) during init; looked up and checked during apply.
  Array param(const std::string& name, const initializers::Initializer& init, const Shape& shape,
              DType dtype = DType::f32);
  // A parameter several methods of one module read (Flax's parameters made in setup(), e.g.
  // Embed's table, read by __call__ and attend): made by the first call during init, the
  // same array for every later call; otherwise as param.
  Array param_once(const std::string& name, const initializers::Initializer& init,
                   const Shape& shape, DType dtype = DType::f32);
  // A variable of another collection (e.g. "batch_stats"), created with `init()` during init —
  // which, unlike param, draws no key, as Flax's Module.variable — and looked up during apply
  // (created there too when its collection is mutable and the variables lack it, as in Flax).
  // Its value is the latest put_variable's.
  Array variable(const std::string& collection, const std::string& name,
                 const std::function<Array()>& init);
  // Flax's Module.has_variable: whether the variables hold `collection`/`name` at this module's
  // path (e.g. an autoregressive cache that init made).
  bool has_variable(const std::string& collection, const std::string& name) const;
  // Flax's Module.put_variable (and `variable(...).value = v`): the new value of a variable of
  // another collection. Every collection is mutable during init; during apply only those
  // Model::apply_mutable names, else a ValueError naming the module, the variable and what to
  // pass (Flax's ModifyScopeVariableError). nn::remat carries the new values out of its region,
  // nn::scan those of the collections of its variable_axes; other writes inside nn::scan and
  // nn::vmap bodies are refused (a ValueError says so).
  void put_variable(const std::string& collection, const std::string& name, const Array& value);
  // Whether put_variable may write `collection` now (Flax's Module.is_mutable_collection).
  bool is_mutable_collection(const std::string& collection) const;
  // A key from rng stream `stream` (falls back to 'params' when the stream is absent, as Flax
  // does); a missing stream is a ValueError naming the module path.
  random::Key make_rng(const std::string& stream);
  bool has_rng(const std::string& stream) const;
  bool is_initializing() const;
  const std::vector<std::string>& path() const { return path_; }
  // "Dense_0/Dense_1", or "(root)".
  std::string path_str() const;

  // Runs `module` in an auto-named child scope: "<class name>_<k>", k counting per class in this
  // scope (Flax's compact naming).
  template <class M, class... Args>
  decltype(auto) operator()(const M& module, Args&&... args) {
    static_assert(module_callable_v<M, Args...>,
                  "flaxpp: this module cannot run on these inputs: a module needs "
                  "`Array operator()(nn::Scope& s, inputs...) const` taking them");
    Scope c = child(next_name(module_name_of(module)));
    return module(c, std::forward<Args>(args)...);
  }
  // Runs `module` in the child scope `name` (Flax's name=...).
  template <class M, class... Args>
  decltype(auto) call(const std::string& name, const M& module, Args&&... args) {
    Scope c = child(name);
    return module(c, std::forward<Args>(args)...);
  }

 private:
  friend Scope internal::make_root_scope(std::shared_ptr<internal::ScopeState> state);
  friend Scope internal::scope_at(std::shared_ptr<internal::ScopeState> state,
                                  std::vector<std::string> path);
  friend const std::shared_ptr<internal::ScopeState>& internal::state_of(const Scope& scope);
  Scope(std::shared_ptr<internal::ScopeState> state, std::vector<std::string> path);
  Scope child(const std::string& name);
  // {collection, path..., name}: where a variable of this module sits in the variables.
  std::vector<std::string> variable_path(const std::string& collection,
                                         const std::string& name) const;
  std::string next_name(const std::string& class_name);

  std::shared_ptr<internal::ScopeState> state_;
  std::vector<std::string> path_;
  std::map<std::string, int> autoname_;  // per class name: the next index
};

namespace internal {
// What all scopes of one init/apply share.
struct ScopeState {
  bool initializing = false;
  Variables variables;  // init: built up; apply: as given
  RngStreams rngs;
  std::map<std::vector<std::string>, std::map<std::string, std::uint32_t>>
      rng_counters;                           // per path, per stream
  std::set<std::string> used_params;          // apply: the parameter paths the model read
  std::set<std::string> mutable_collections;  // apply: those put_variable may write
  // In the state of a lifted copy (nn::scan's layer, nn::vmap's member): the collections it
  // carries out (nn::scan's variable_axes but "params"); a write to any other would be lost, so
  // put_variable refuses it.
  std::optional<std::set<std::string>> copy_carries;
  // The open bodies of nn::remat regions, innermost last (BodyWrites).
  std::vector<class BodyWrites*> open_bodies;
};

// The variables a lifted region's body writes (nn::remat): put_variable inside the body goes to
// the state as usual, so later reads in the body see it, and is recorded here. close() takes
// the written values (the body's traced ones) and restores the variables as they were before
// the body; the region returns those values as extra results, and commit() writes the
// region's results to the state (recorded in turn by an enclosing body).
class BodyWrites {
 public:
  explicit BodyWrites(const Scope& s);
  ~BodyWrites();
  BodyWrites(const BodyWrites&) = delete;
  BodyWrites& operator=(const BodyWrites&) = delete;

  // Brackets one trace of the body.
  void open();
  std::vector<Array> close();
  // After the region: the region's results for the recorded writes, in close()'s order.
  void commit(std::span<const Array> values);
  void record(const std::vector<std::string>& key_path);

 private:
  std::shared_ptr<ScopeState> state_;
  Variables before_;
  std::vector<std::vector<std::string>> written_;
};
// Checks, after apply, that every given parameter was used.
void check_all_params_used(const ScopeState& state);
}  // namespace internal

// A module bound for init/apply (Flax's Module.init / Module.apply). A Model is itself a
// module of M's class name, so it can also be called as a child.
template <class M>
class Model {
 public:
  explicit Model(M module) : module_(std::move(module)) {
    static_cast<void>(&module_name<M>);  // a module without a name fails here, saying so
  }

  static std::string class_name() { return module_name<M>(); }
  std::string instance_class_name() const { return module_name_of(module_); }
  template <class... Args>
  decltype(auto) operator()(Scope& s, Args&&... args) const {
    return module_(s, std::forward<Args>(args)...);
  }

  // init(key, inputs...): the key seeds the 'params' stream.
  template <class... Args>
  Variables init(const random::Key& key, Args&&... args) const {
    return init(RngStreams{{"params", key}}, std::forward<Args>(args)...);
  }
  template <class... Args>
  Variables init(const RngStreams& rngs, Args&&... args) const {
    auto state = std::make_shared<internal::ScopeState>();
    state->initializing = true;
    state->rngs = rngs;
    Scope root = internal::make_root_scope(state);
    (void)module_(root, std::forward<Args>(args)...);
    return std::move(state->variables);
  }
  // apply(variables, inputs...) with no rng streams.
  template <class... Args>
  decltype(auto) apply(const Variables& variables, Args&&... args) const {
    return apply_with_rngs(variables, RngStreams{}, std::forward<Args>(args)...);
  }
  template <class... Args>
  decltype(auto) apply_with_rngs(const Variables& variables, const RngStreams& rngs,
                                 Args&&... args) const {
    auto state = std::make_shared<internal::ScopeState>();
    state->variables = variables;
    state->rngs = rngs;
    Scope root = internal::make_root_scope(state);
    decltype(auto) out = module_(root, std::forward<Args>(args)...);
    internal::check_all_params_used(*state);
    return out;
  }
  // Flax's apply(variables, ..., mutable=[...]): also returns the collections named in
  // `mutable_collections` as the run left them (the whole collection, updated), e.g.
  //   auto [y, updates] = model.apply_mutable(variables, {"batch_stats"}, x);
  template <class... Args>
  auto apply_mutable(const Variables& variables, const std::set<std::string>& mutable_collections,
                     Args&&... args) const {
    return apply_mutable_with_rngs(variables, RngStreams{}, mutable_collections,
                                   std::forward<Args>(args)...);
  }
  template <class... Args>
  auto apply_mutable_with_rngs(const Variables& variables, const RngStreams& rngs,
                               const std::set<std::string>& mutable_collections,
                               Args&&... args) const {
    if (mutable_collections.count("params"))
      throw ValueError(
          "apply_mutable: \"params\" cannot be mutable here (parameters change through "
          "gradients); name other collections, such as \"batch_stats\"");
    auto state = std::make_shared<internal::ScopeState>();
    state->variables = variables;
    state->rngs = rngs;
    state->mutable_collections = mutable_collections;
    Scope root = internal::make_root_scope(state);
    auto out = module_(root, std::forward<Args>(args)...);
    internal::check_all_params_used(*state);
    Variables updated;
    for (const std::string& c : mutable_collections)
      if (state->variables.contains(c)) updated.set(c, state->variables[c]);
    return std::pair<decltype(out), Variables>{std::move(out), std::move(updated)};
  }
  const M& module() const { return module_; }

 private:
  M module_;
};

}  // namespace flaxpp::nn
