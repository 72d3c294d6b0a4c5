// Reference problems of the random family (refs-format.md, "Random numbers"): keys, split,
// fold_in, bits, the samplers and the jax.nn.initializers; random.randint (refs-problems.md).
#include <map>

#include "flaxpp/io/refs.hpp"
#include "flaxpp/random/distributions.hpp"
#include "flaxpp/random/initializers.hpp"
#include "io/refs/case_budget.hpp"

namespace flaxpp::refs {
namespace {

using random::Key;
namespace init = initializers;

Tree on_device(const Array& a, const CaseContext& context) {
  return Tree(a.to(context.device));
}

// Builds a jax.nn.initializers.<name>(**args) from a case's "args" object.
init::Initializer make_initializer(const std::string& name, const Inputs& args) {
  auto axes = [&](std::string_view key, init::Axes fallback) {
    return args.has(key) ? args.int_list(key) : fallback;
  };
  auto fan_family = [&](init::Initializer (*factory)(init::Axes, init::Axes, init::Axes)) {
    args.expect_only({"in_axis", "out_axis", "batch_axis"}, name);
    return factory(axes("in_axis", {-2}), axes("out_axis", {-1}), axes("batch_axis", {}));
  };
  using Factory = init::Initializer (*)(init::Axes, init::Axes, init::Axes);
  static const std::map<std::string, Factory, std::less<>> fan_initializers = {
      {"lecun_normal", &init::lecun_normal},     {"lecun_uniform", &init::lecun_uniform},
      {"glorot_normal", &init::glorot_normal},   {"glorot_uniform", &init::glorot_uniform},
      {"xavier_normal", &init::xavier_normal},   {"xavier_uniform", &init::xavier_uniform},
      {"he_normal", &init::he_normal},           {"he_uniform", &init::he_uniform},
      {"kaiming_normal", &init::kaiming_normal}, {"kaiming_uniform", &init::kaiming_uniform},
  };
  if (const auto it = fan_initializers.find(name); it != fan_initializers.end())
    return fan_family(it->second);
  if (name == "zeros" || name == "ones") {
    args.expect_only({}, name);
    return name == "zeros" ? init::zeros() : init::ones();
  }
  if (name == "constant") {
    args.expect_only({"value"}, name);
    return init::constant(args.number("value"));
  }
  if (name == "normal") {
    args.expect_only({"stddev"}, name);
    return init::normal(args.number("stddev", 1e-2));
  }
  if (name == "uniform") {
    args.expect_only({"scale"}, name);
    return init::uniform(args.number("scale", 1e-2));
  }
  if (name == "truncated_normal") {
    args.expect_only({"stddev", "lower", "upper"}, name);
    return init::truncated_normal(args.number("stddev", 1e-2), args.number("lower", -2.0),
                                  args.number("upper", 2.0));
  }
  if (name == "variance_scaling") {
    args.expect_only({"scale", "mode", "distribution", "in_axis", "out_axis", "batch_axis"}, name);
    try {
      return init::variance_scaling(
          args.number("scale"), init::fan_mode_from_name(args.string("mode")),
          init::distribution_from_name(args.string("distribution")), axes("in_axis", {-2}),
          axes("out_axis", {-1}), axes("batch_axis", {}));
    } catch (const InputError&) {
      throw;
    } catch (const ValueError& e) {
      throw InputError(detail::str(args.path(), ": ", e.what()));
    }
  }
  std::string known = "zeros, ones, constant, normal, uniform, truncated_normal, variance_scaling";
  for (const auto& [n, f] : fan_initializers)
    known += ", " + n;
  throw InputError(detail::str("unknown initializer \"", name, "\"; expected one of ", known));
}

}  // namespace

void register_random_problems(ProblemRegistry& registry) {
  registry.add("random.key", [](const Inputs& in, const CaseContext& cx) {
    return on_device(random::key(in.integer("seed"), cx.mode).data(), cx);
  });
  registry.add("random.split", [](const Inputs& in, const CaseContext& cx) {
    const std::int64_t num = in.integer("num", 2);
    if (num < 0) throw InputError(detail::str(in.path(), ".num: expected a count >= 0, got ", num));
    // Each key is a random::Key, then two words of key data, then their copy on the device.
    check_case_memory(static_cast<double>(num) * (sizeof(random::Key) + 2 * 8), in.path() + ".num",
                      detail::str("splitting a key into ", num, " keys"));
    return on_device(random::key_data(random::split(in.key("key", cx.mode), num)), cx);
  });
  registry.add("random.fold_in", [](const Inputs& in, const CaseContext& cx) {
    const std::int64_t data = in.integer("data");
    if (data < 0 || data > 0xFFFFFFFFll)
      throw InputError(
          detail::str(in.path(), ".data: expected an integer in [0, 2^32), got ", data));
    return on_device(
        random::fold_in(in.key("key", cx.mode), static_cast<std::uint32_t>(data)).data(), cx);
  });
  registry.add("random.bits", [](const Inputs& in, const CaseContext& cx) {
    return on_device(random::bits(in.key("key", cx.mode), in.shape("shape")), cx);
  });
  registry.add("random.uniform", [](const Inputs& in, const CaseContext& cx) {
    return on_device(random::uniform(in.key("key", cx.mode), in.shape("shape"), DType::f32,
                                     in.number("minval", 0.0), in.number("maxval", 1.0)),
                     cx);
  });
  registry.add("random.randint", [](const Inputs& in, const CaseContext& cx) {
    const std::string dtype = in.has("dtype") ? in.string("dtype") : "int32";
    if (dtype != "int32" && dtype != "uint32")
      throw InputError(
          detail::str(in.path(), ".dtype: expected \"int32\" or \"uint32\", got \"", dtype, "\""));
    return on_device(
        random::randint(in.key("key", cx.mode), in.shape("shape"), in.integer("minval"),
                        in.integer("maxval"), dtype == "int32" ? DType::i32 : DType::u32),
        cx);
  });
  registry.add("random.normal", [](const Inputs& in, const CaseContext& cx) {
    return on_device(random::normal(in.key("key", cx.mode), in.shape("shape")), cx);
  });
  registry.add("random.truncated_normal", [](const Inputs& in, const CaseContext& cx) {
    return on_device(random::truncated_normal(in.key("key", cx.mode), in.number("lower"),
                                              in.number("upper"), in.shape("shape")),
                     cx);
  });
  registry.add("initializer", [](const Inputs& in, const CaseContext& cx) {
    const init::Initializer initializer =
        make_initializer(in.string("name"), in.object("args", true));
    const Key key = in.key("key", cx.mode);
    const Shape shape = in.shape("shape");
    try {
      return on_device(initializer(key, shape, DType::f32), cx);
    } catch (const ValueError& e) {
      // Initialisers fail only on their arguments (axes out of range, shapes without fans).
      throw InputError(detail::str(in.path(), ": ", e.what()));
    }
  });
}

}  // namespace flaxpp::refs
