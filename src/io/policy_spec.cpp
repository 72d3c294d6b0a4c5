// Policy specs (refs-format.md, "Policy spec") -> checkpoint policies.
#include "flaxpp/io/policy_spec.hpp"

#include <set>

namespace flaxpp::io {
namespace {

namespace cp = checkpoint_policies;

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  throw ParseError(detail::str(path, ": ", message));
}

void expect_keys(const Json& spec, const std::string& path,
                 std::initializer_list<const char*> allowed) {
  for (const auto& item : spec.items()) {
    bool ok = item.key() == "name";
    for (const char* a : allowed)
      ok = ok || item.key() == a;
    if (ok) continue;
    std::string list;
    for (const char* a : allowed)
      list += detail::str(list.empty() ? "" : ", ", a);
    fail(path + "." + item.key(), detail::str("policy ", spec["name"].get<std::string>(),
                                              " does not take \"", item.key(), "\"",
                                              list.empty() ? std::string("; it takes no arguments")
                                                           : detail::str("; it takes: ", list)));
  }
}

std::vector<std::string> names(const Json& spec, const std::string& path, const char* key) {
  if (!spec.contains(key)) fail(path, detail::str("missing \"", key, "\" (a list of names)"));
  const Json& v = spec[key];
  if (!v.is_array())
    fail(path + "." + key, detail::str("expected a list of names, got ", describe_json(v)));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) fail(detail::str(path, ".", key, "[", i, "]"), "expected a name string");
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

MemoryKind memory_kind(const Json& spec, const std::string& path, const char* key,
                       MemoryKind fallback) {
  if (!spec.contains(key)) return fallback;
  const Json& v = spec[key];
  if (!v.is_string())
    fail(path + "." + key, detail::str("expected a memory kind string, got ", describe_json(v)));
  try {
    return memory_kind_from_name(v.get<std::string>());
  } catch (const ValueError& e) {
    fail(path + "." + key, e.what());
  }
}

// save_from_both_policies nests specs; deeper nesting is refused rather than recursed into
// (a hostile spec must not overflow the stack, here or when the policy is asked).
constexpr int kMaxNesting = 64;

PolicyPtr policy_at(const Json& spec, const std::string& path, int depth) {
  if (spec.is_string()) {
    const std::string& name = spec.get_ref<const std::string&>();
    try {
      return cp::from_name(name);
    } catch (const ValueError& e) {
      fail(path, e.what());
    }
  }
  if (spec.is_object() && spec.contains("name") && !spec["name"].is_string())
    fail(path + ".name",
         detail::str("expected a policy name string such as \"dots_saveable\" or "
                     "\"save_only_these_names\", got ",
                     describe_json(spec["name"])));
  if (!spec.is_object() || !spec.contains("name"))
    fail(path, detail::str("expected a policy name string or an object with a \"name\", got ",
                           describe_json(spec)));
  const std::string name = spec["name"].get<std::string>();
  if (name == "save_only_these_names" || name == "save_any_names_but_these" ||
      name == "save_anything_except_these_names") {
    expect_keys(spec, path, {"names"});
    auto n = names(spec, path, "names");
    if (name == "save_only_these_names") return cp::save_only_these_names(std::move(n));
    if (name == "save_any_names_but_these") return cp::save_any_names_but_these(std::move(n));
    return cp::save_anything_except_these_names(std::move(n));
  }
  if (name == "save_and_offload_only_these_names") {
    expect_keys(
        spec, path,
        {"names_which_can_be_saved", "names_which_can_be_offloaded", "offload_src", "offload_dst"});
    return cp::save_and_offload_only_these_names(
        names(spec, path, "names_which_can_be_saved"),
        names(spec, path, "names_which_can_be_offloaded"),
        memory_kind(spec, path, "offload_src", MemoryKind::device),
        memory_kind(spec, path, "offload_dst", MemoryKind::pinned_host));
  }
  if (name == "offload_dot_with_no_batch_dims") {
    expect_keys(spec, path, {"offload_src", "offload_dst"});
    return cp::offload_dot_with_no_batch_dims(
        memory_kind(spec, path, "offload_src", MemoryKind::device),
        memory_kind(spec, path, "offload_dst", MemoryKind::pinned_host));
  }
  if (name == "save_from_both_policies") {
    expect_keys(spec, path, {"policies"});
    // Both branches lvalues: a temporary in one would copy the nested specs at every level.
    static const Json kMissing;
    const Json& ps = spec.contains("policies") ? spec["policies"] : kMissing;
    if (!ps.is_array() || ps.size() != 2)
      fail(path + ".policies",
           detail::str("expected a list of exactly two policy specs, got ", describe_json(ps)));
    if (depth >= kMaxNesting)
      fail(path, detail::str("save_from_both_policies is nested more than ", kMaxNesting,
                             " levels deep"));
    PolicyPtr p[2];
    for (std::size_t i = 0; i < 2; ++i) {
      p[i] = policy_at(ps[i], detail::str(path, ".policies[", i, "]"), depth + 1);
      if (cp::is_none(p[i]))
        fail(detail::str(path, ".policies[", i, "]"), "\"none\" is not a policy");
    }
    return cp::save_from_both_policies(p[0], p[1]);
  }
  expect_keys(spec, path, {});
  try {
    return cp::from_name(name);
  } catch (const ValueError& e) {
    fail(path + ".name", e.what());
  }
}

}  // namespace

PolicyPtr policy_from_spec(const Json& spec, const std::string& path) {
  return policy_at(spec, path, 0);
}

PolicyPtr policy_from_spec_text(const std::string& raw) {
  const std::size_t first = raw.find_first_not_of(" \t\n\r");
  const std::size_t last = raw.find_last_not_of(" \t\n\r");
  const std::string text =
      first == std::string::npos ? std::string() : raw.substr(first, last - first + 1);
  if (!text.empty() && text.front() == '{') {
    Json spec;
    try {
      spec = Json::parse(text);
    } catch (const Json::exception& e) {
      throw ParseError(detail::str("policy spec is not valid JSON: ", e.what()));
    }
    return policy_from_spec(spec, "policy");
  }
  return policy_from_spec(Json(text), "policy");
}

}  // namespace flaxpp::io
