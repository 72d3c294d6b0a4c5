// Optimizer specs -> optax-compatible gradient transformations.
#include "flaxpp/io/optimizer_spec.hpp"

#include <map>
#include <optional>
#include <set>

namespace flaxpp::io {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  throw ParseError(detail::str(path, ": ", message));
}

// Step counts beyond optax's int32 count are never reached.
constexpr std::int64_t kMaxSteps = 2147483647;

// Typed access to a spec object's keys with defaults; every key must be read (checked by
// done()), so a key the optax function does not accept is an error.
class Fields {
 public:
  Fields(const Json& spec, std::string path, std::string function)
      : spec_(spec), path_(std::move(path)), function_(std::move(function)) {}
  double number(const char* key, double fallback) {
    read_.insert(key);
    if (!spec_.contains(key)) return fallback;
    if (!spec_[key].is_number())
      fail(path_ + "." + key, detail::str("expected a number, got ", describe_json(spec_[key])));
    return spec_[key].get<double>();
  }
  double number(const char* key) {
    if (!spec_.contains(key)) fail(path_, detail::str(function_, " needs \"", key, "\""));
    return number(key, 0.0);
  }
  std::int64_t integer(const char* key, std::int64_t fallback) {
    read_.insert(key);
    if (!spec_.contains(key)) return fallback;
    const auto v = integer_value(spec_[key], true);
    if (!v)
      fail(path_ + "." + key, detail::str("expected an integer, got ", describe_json(spec_[key])));
    return *v;
  }
  std::int64_t integer(const char* key) {
    if (!spec_.contains(key)) fail(path_, detail::str(function_, " needs \"", key, "\""));
    return integer(key, 0);
  }
  // An integer >= `least` (schedules count steps: a negative count would overflow their
  // arithmetic, and optax rejects an empty decay).
  std::int64_t integer_at_least(const char* key, std::int64_t least,
                                std::optional<std::int64_t> fallback = std::nullopt) {
    if (!spec_.contains(key) && !fallback)
      fail(path_, detail::str(function_, " needs \"", key, "\""));
    const std::int64_t v = integer(key, fallback.value_or(least));
    if (v < least || v > kMaxSteps)
      fail(path_ + "." + key,
           detail::str("expected a step count in [", least, ", ", kMaxSteps, "], got ", v));
    return v;
  }
  bool boolean(const char* key, bool fallback) {
    read_.insert(key);
    if (!spec_.contains(key)) return fallback;
    if (!spec_[key].is_boolean())
      fail(path_ + "." + key,
           detail::str("expected true or false, got ", describe_json(spec_[key])));
    return spec_[key].get<bool>();
  }
  std::optional<double> optional_number(const char* key, std::optional<double> fallback) {
    read_.insert(key);
    if (!spec_.contains(key) || spec_[key].is_null()) return fallback;
    return number(key, 0.0);
  }
  void skip(const char* key) { read_.insert(key); }
  // Every key was one the function takes.
  void done() const {
    for (const auto& item : spec_.items())
      if (!read_.count(item.key()))
        fail(path_ + "." + item.key(),
             detail::str(function_, " does not accept \"", item.key(), "\"; it takes: ", [&] {
               std::string s;
               for (const auto& k : read_)
                 s += (s.empty() ? "" : ", ") + k;
               return s;
             }()));
  }

 private:
  const Json& spec_;
  std::string path_, function_;
  std::set<std::string> read_{"name"};
};

std::string name_of(const Json& spec, const std::string& path) {
  if (!spec.is_object() || !spec.contains("name") || !spec["name"].is_string())
    fail(path, detail::str("expected an object with a \"name\", got ", describe_json(spec)));
  return spec["name"].get<std::string>();
}

}  // namespace

optim::LearningRate learning_rate_from_spec(const Json& spec, const std::string& path) {
  if (spec.is_number()) return spec.get<double>();
  const std::string name = name_of(spec, path);
  Fields f(spec, path, name + " schedule");
  optim::Schedule schedule;
  if (name == "constant") {
    schedule = optim::constant_schedule(f.number("value"));
  } else if (name == "linear") {
    schedule = optim::linear_schedule(f.number("init_value"), f.number("end_value"),
                                      f.integer("transition_steps"),
                                      f.integer_at_least("transition_begin", 0, 0));
  } else if (name == "cosine_decay") {
    schedule =
        optim::cosine_decay_schedule(f.number("init_value"), f.integer_at_least("decay_steps", 1),
                                     f.number("alpha", 0.0), f.number("exponent", 1.0));
  } else if (name == "warmup_cosine_decay") {
    const double init = f.number("init_value"), peak = f.number("peak_value");
    const std::int64_t warmup = f.integer_at_least("warmup_steps", 0);
    // optax decays over decay_steps - warmup_steps steps, which must be > 0.
    const std::int64_t decay = f.integer_at_least("decay_steps", warmup + 1);
    schedule = optim::warmup_cosine_decay_schedule(
        init, peak, warmup, decay, f.number("end_value", 0.0), f.number("exponent", 1.0));
  } else {
    fail(path + ".name",
         detail::str("unknown schedule \"", name,
                     "\"; expected constant, linear, cosine_decay or warmup_cosine_decay"));
  }
  f.done();
  return schedule;
}

optim::GradientTransformation optimizer_from_spec(const Json& spec, const std::string& path) {
  const std::string name = name_of(spec, path);
  Fields f(spec, path, name);
  if (!spec.contains("learning_rate")) fail(path, detail::str(name, " needs \"learning_rate\""));
  const optim::LearningRate lr =
      learning_rate_from_spec(spec["learning_rate"], path + ".learning_rate");
  f.skip("learning_rate");
  const std::optional<double> clip = f.optional_number("clip_by_global_norm", std::nullopt);
  optim::GradientTransformation tx;
  if (name == "sgd" || name == "momentum") {
    const auto momentum =
        f.optional_number("momentum", name == "momentum" ? std::optional(0.9) : std::nullopt);
    tx = optim::sgd(lr, momentum, f.boolean("nesterov", false));
  } else if (name == "adam" || name == "adamw") {
    const double b1 = f.number("b1", 0.9), b2 = f.number("b2", 0.999), eps = f.number("eps", 1e-8),
                 eps_root = f.number("eps_root", 0.0);
    const double weight_decay = name == "adamw" ? f.number("weight_decay", 1e-4) : 0.0;
    const bool nesterov = f.boolean("nesterov", false);
    tx = name == "adam" ? optim::adam(lr, {.b1 = b1, .b2 = b2, .eps = eps, .eps_root = eps_root,
                                           .nesterov = nesterov})
                        : optim::adamw(lr, {.b1 = b1, .b2 = b2, .eps = eps, .eps_root = eps_root,
                                            .weight_decay = weight_decay, .nesterov = nesterov});
  } else if (name == "rmsprop") {
    tx = optim::rmsprop(lr, {.decay = f.number("decay", 0.9),
                             .eps = f.number("eps", 1e-8),
                             .initial_scale = f.number("initial_scale", 0.0),
                             .eps_in_sqrt = f.boolean("eps_in_sqrt", true),
                             .centered = f.boolean("centered", false),
                             .momentum = f.optional_number("momentum", std::nullopt),
                             .nesterov = f.boolean("nesterov", false),
                             .bias_correction = f.boolean("bias_correction", false)});
  } else {
    fail(path + ".name", detail::str("unknown optimizer \"", name,
                                     "\"; expected sgd, momentum, adam, adamw or rmsprop"));
  }
  f.done();
  return clip ? optim::chain({optim::clip_by_global_norm(*clip), tx}) : tx;
}

}  // namespace flaxpp::io
