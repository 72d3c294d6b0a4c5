// Scope: Flax's parameter creation/lookup and rng-key derivation at a module path.
#include "flaxpp/nn/scope.hpp"

#include <algorithm>

#include "nn/sha1.hpp"

namespace flaxpp::nn {
namespace {

std::string join(const std::vector<std::string>& path) {
  std::string out;
  for (const std::string& p : path)
    out += (out.empty() ? "" : "/") + p;
  return out;
}

// Minimal big-endian bytes of a non-negative int, as Flax encodes ints (0 -> no bytes).
std::string int_bytes(std::uint32_t v) {
  std::string out;
  while (v != 0) {
    out.insert(out.begin(), static_cast<char>(v & 0xFF));
    v >>= 8;
  }
  return out;
}

}  // namespace

random::Key fold_in_static(const random::Key& base, const std::vector<std::string>& path,
                           std::uint32_t counter) {
  std::string data;
  for (const std::string& p : path)
    data += p;
  data += int_bytes(counter);
  const auto digest = internal::sha1(data);
  const std::uint32_t h = (std::uint32_t{digest[0]} << 24) | (std::uint32_t{digest[1]} << 16) |
                          (std::uint32_t{digest[2]} << 8) | std::uint32_t{digest[3]};
  return random::fold_in(base, h);
}

Scope::Scope(std::shared_ptr<internal::ScopeState> state, std::vector<std::string> path)
    : state_(std::move(state)), path_(std::move(path)) {}

Scope internal::make_root_scope(std::shared_ptr<ScopeState> state) {
  return Scope(std::move(state), {});
}

Scope internal::scope_at(std::shared_ptr<ScopeState> state, std::vector<std::string> path) {
  return Scope(std::move(state), std::move(path));
}

const std::shared_ptr<internal::ScopeState>& internal::state_of(const Scope& scope) {
  return scope.state_;
}

std::string Scope::path_str() const {
  return path_.empty() ? std::string("(root)") : join(path_);
}

bool Scope::is_initializing() const {
  return state_->initializing;
}

bool Scope::has_rng(const std::string& stream) const {
  return state_->rngs.count(stream) != 0;
}

std::string Scope::next_name(const std::string& class_name) {
  return detail::str(class_name, "_", autoname_[class_name]++);
}

Scope Scope::child(const std::string& name) {
  std::vector<std::string> p = path_;
  p.push_back(name);
  return Scope(state_, std::move(p));
}

random::Key Scope::make_rng(const std::string& stream) {
  std::string used = stream;
  if (!has_rng(stream)) {
    if (!has_rng("params"))
      throw ValueError(detail::str(
          "module ", path_str(), " needs a key from the rng stream \"", stream,
          "\", but none was given; pass it to init/apply, e.g. {\"", stream, "\": key}"));
    used = "params";  // Flax falls back to the params stream
  }
  // Counters live per (path, stream) in the shared state, so a re-entered scope continues them.
  std::uint32_t& counter = state_->rng_counters[path_][used];
  ++counter;
  return fold_in_static(state_->rngs.at(used), path_, counter);
}

Array Scope::param(const std::string& name, const initializers::Initializer& init,
                   const Shape& shape, DType dtype) {
  std::vector<std::string> key_path = path_;
  key_path.push_back(name);
  const std::string where = "params/" + join(key_path);
  const Tree* params =
      state_->variables.contains("params") ? &state_->variables["params"] : nullptr;
  const Tree* existing = params != nullptr ? params->find(key_path) : nullptr;
  if (state_->initializing) {
    if (existing != nullptr)
      throw ValueError(detail::str("module ", path_str(), " creates parameter \"", name,
                                   "\" twice; give each parameter a distinct name"));
    Array value = init(make_rng("params"), shape, dtype);
    Tree updated = params != nullptr ? *params : Tree();
    updated.set_at(key_path, value);
    state_->variables.set("params", std::move(updated));
    return value;
  }
  if (existing == nullptr || !existing->is_leaf())
    throw ValueError(detail::str(
        "apply: module ", path_str(), " needs parameter ", where, ", which the variables ",
        params == nullptr ? std::string("do not have (no \"params\" collection)")
                          : std::string("do not hold as an array"),
        "; pass the variables that init of this model returned ({\"params\": ...})"));
  const Array& value = existing->array();
  if (value.shape() != shape || value.dtype() != dtype)
    throw ValueError(detail::str("apply: parameter ", where, " is ", value.aval(), ", but module ",
                                 path_str(), " expects ", AVal{shape, dtype},
                                 " for its input; is the input of the wrong size, or "
                                 "are the variables from another model?"));
  state_->used_params.insert(where);
  return value;
}

Array Scope::param_once(const std::string& name, const initializers::Initializer& init,
                        const Shape& shape, DType dtype) {
  if (state_->initializing && state_->variables.contains("params")) {
    std::vector<std::string> key_path = path_;
    key_path.push_back(name);
    const Tree* existing = state_->variables["params"].find(key_path);
    if (existing != nullptr && existing->is_leaf()) {
      const Array& value = existing->array();
      if (value.shape() != shape || value.dtype() != dtype)
        throw ValueError(detail::str("module ", path_str(), " reads parameter \"", name, "\" as ",
                                     AVal{shape, dtype}, ", but made it as ", value.aval(),
                                     "; every method must ask for the same shape and dtype"));
      return value;
    }
  }
  return param(name, init, shape, dtype);
}

std::vector<std::string> Scope::variable_path(const std::string& collection,
                                              const std::string& name) const {
  std::vector<std::string> key_path{collection};
  key_path.insert(key_path.end(), path_.begin(), path_.end());
  key_path.push_back(name);
  return key_path;
}

Array Scope::variable(const std::string& collection, const std::string& name,
                      const std::function<Array()>& init) {
  if (collection == "params")
    throw ValueError(detail::str(
        "module ", path_str(), ": create parameters with param(), not variable(\"params\", ...)"));
  const std::vector<std::string> key_path = variable_path(collection, name);
  const Tree* existing = state_->variables.find(key_path);
  if (state_->initializing && existing != nullptr)
    throw ValueError(
        detail::str("module ", path_str(), " creates variable ", collection, "/", name, " twice"));
  // Made during init (every collection is mutable then), or during apply in a mutable one.
  if (existing == nullptr && is_mutable_collection(collection)) {
    Array value = init();
    // Made inside a remat'd body, it leaves the region as a write does.
    if (!state_->open_bodies.empty()) state_->open_bodies.back()->record(key_path);
    state_->variables.set_at(key_path, value);
    return value;
  }
  if (existing == nullptr || !existing->is_leaf())
    throw ValueError(
        detail::str("apply: module ", path_str(), " needs variable ", join(key_path),
                    ", which the variables do not hold; pass the variables that init returned"));
  return existing->array();
}

bool Scope::has_variable(const std::string& collection, const std::string& name) const {
  return state_->variables.find(variable_path(collection, name)) != nullptr;
}

bool Scope::is_mutable_collection(const std::string& collection) const {
  return collection != "params" &&
         (state_->initializing || state_->mutable_collections.count(collection) != 0);
}

void Scope::put_variable(const std::string& collection, const std::string& name,
                         const Array& value) {
  const std::vector<std::string> key_path = variable_path(collection, name);
  if (collection == "params")
    throw ValueError(detail::str("module ", path_str(), " writes parameter ", join(key_path),
                                 "; parameters change through gradients, not put_variable"));
  if (!is_mutable_collection(collection))
    throw ValueError(detail::str(
        "apply: module ", path_str(), " updates variable ", join(key_path), ", but collection \"",
        collection, "\" is not mutable; pass it to apply_mutable (Flax's mutable=[\"", collection,
        "\"]) and take the updated collection from its result"));
  if (state_->copy_carries && !state_->copy_carries->count(collection) && !state_->initializing)
    throw ValueError(detail::str(
        "module ", path_str(), " updates variable ", join(key_path),
        " inside nn::scan or nn::vmap, which carry out only the collections of variable_axes; "
        "add \"",
        collection, "\" to nn::scan's variable_axes (nn::vmap carries none yet)"));
  if (!state_->open_bodies.empty()) state_->open_bodies.back()->record(key_path);
  state_->variables.set_at(key_path, value);
}

internal::BodyWrites::BodyWrites(const Scope& s) : state_(internal::state_of(s)) {}

internal::BodyWrites::~BodyWrites() {
  // A body that threw leaves its bracket open: close it without its values.
  if (!state_->open_bodies.empty() && state_->open_bodies.back() == this) {
    state_->open_bodies.pop_back();
    state_->variables = before_;
  }
}

void internal::BodyWrites::open() {
  before_ = state_->variables;
  written_.clear();
  state_->open_bodies.push_back(this);
}

void internal::BodyWrites::record(const std::vector<std::string>& key_path) {
  if (std::find(written_.begin(), written_.end(), key_path) == written_.end())
    written_.push_back(key_path);
}

std::vector<Array> internal::BodyWrites::close() {
  FLAXPP_ASSERT(!state_->open_bodies.empty() && state_->open_bodies.back() == this,
                "BodyWrites::close without open");
  std::vector<Array> values;
  for (const auto& key_path : written_)
    values.push_back(state_->variables.find(key_path)->array());
  state_->open_bodies.pop_back();
  state_->variables = before_;
  return values;
}

void internal::BodyWrites::commit(std::span<const Array> values) {
  FLAXPP_ASSERT(values.size() == written_.size(), "BodyWrites::commit: ", values.size(),
                " values for ", written_.size(), " writes");
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!state_->open_bodies.empty()) state_->open_bodies.back()->record(written_[i]);
    state_->variables.set_at(written_[i], values[i]);
  }
}

void internal::check_all_params_used(const ScopeState& state) {
  if (!state.variables.contains("params")) return;
  std::string extra;
  for (const auto& [path, leaf] : state.variables["params"].flatten())
    if (!state.used_params.count("params/" + path))
      extra += detail::str(extra.empty() ? "" : ", ", "params/", path);
  if (!extra.empty())
    throw ValueError(detail::str("apply: the variables hold parameters the model does not use: ",
                                 extra, "; were these variables made by init of this model?"));
}

}  // namespace flaxpp::nn
