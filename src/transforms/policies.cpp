// jax.checkpoint_policies: each a small Policy that answers per primal equation.
#include <algorithm>
#include <set>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/lax_convolution.hpp"
#include "flaxpp/transforms/checkpoint.hpp"

namespace flaxpp::checkpoint_policies {
namespace {

using ir::Decision;

class FnPolicy final : public ir::Policy {
 public:
  FnPolicy(std::string name, PolicyFn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  Decision decide(const ir::Primitive& p, std::span<const AVal> in,
                  const ir::Params& params) const override {
    return fn_(p, in, params);
  }
  std::string str() const override { return name_; }

 private:
  std::string name_;
  PolicyFn fn_;
};

PolicyPtr make(std::string name, PolicyFn fn) {
  return std::make_shared<FnPolicy>(std::move(name), std::move(fn));
}

Decision save_if(bool b) {
  return b ? Decision::save() : Decision::recompute();
}

bool is_dot_without_batch_dims(const ir::Primitive& p, const ir::Params& params) {
  if (&p != &lax::dot_general_p) return false;
  const auto& d = params.get<ir::DotDimensionNumbers>("dimension_numbers");
  return d.lhs_batch.empty() && d.rhs_batch.empty();
}

const std::string* name_of(const ir::Primitive& p, const ir::Params& params) {
  return &p == &lax::name_p ? &params.get<std::string>("name") : nullptr;
}

std::string names_str(const std::string& fn, const std::vector<std::string>& names) {
  std::string out = fn + "(";
  for (std::size_t i = 0; i < names.size(); ++i)
    out += detail::str(i ? ", " : "", "'", names[i], "'");
  return out + ")";
}

bool listed(const std::vector<std::string>& names, const std::string& n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

void check_offload_kinds(const char* fn, MemoryKind src, MemoryKind dst) {
  if (src == dst)
    throw ValueError(detail::str(
        fn, ": offload_src and offload_dst are both \"", memory_kind_name(src),
        "\"; offloading moves residuals between memory kinds, e.g. device -> pinned_host"));
}

}  // namespace

PolicyPtr everything_saveable() {
  return make("everything_saveable", [](auto&&...) { return Decision::save(); });
}
PolicyPtr nothing_saveable() {
  return make("nothing_saveable", [](auto&&...) { return Decision::recompute(); });
}
PolicyPtr dots_saveable() {
  // dot_general and convolutions (JAX's DotsSaveable(False)); dots_with_no_batch_dims_saveable
  // saves no convolution.
  return make("dots_saveable", [](const ir::Primitive& p, auto&&...) {
    return save_if(&p == &lax::dot_general_p || &p == &lax::conv_general_dilated_p);
  });
}
PolicyPtr checkpoint_dots() {
  return dots_saveable();
}
PolicyPtr dots_with_no_batch_dims_saveable() {
  return make("dots_with_no_batch_dims_saveable",
              [](const ir::Primitive& p, auto, const ir::Params& params) {
                return save_if(is_dot_without_batch_dims(p, params));
              });
}
PolicyPtr checkpoint_dots_with_no_batch_dims() {
  return dots_with_no_batch_dims_saveable();
}

PolicyPtr save_only_these_names(std::vector<std::string> names) {
  std::string label = names_str("save_only_these_names", names);
  return make(std::move(label),
              [names = std::move(names)](const ir::Primitive& p, auto, const ir::Params& params) {
                const std::string* n = name_of(p, params);
                return save_if(n != nullptr && listed(names, *n));
              });
}

PolicyPtr save_any_names_but_these(std::vector<std::string> names) {
  std::string label = names_str("save_any_names_but_these", names);
  return make(std::move(label),
              [names = std::move(names)](const ir::Primitive& p, auto, const ir::Params& params) {
                const std::string* n = name_of(p, params);
                return save_if(n != nullptr && !listed(names, *n));
              });
}

PolicyPtr save_anything_except_these_names(std::vector<std::string> names) {
  std::string label = names_str("save_anything_except_these_names", names);
  return make(std::move(label),
              [names = std::move(names)](const ir::Primitive& p, auto, const ir::Params& params) {
                const std::string* n = name_of(p, params);
                return save_if(n == nullptr || !listed(names, *n));
              });
}

PolicyPtr save_and_offload_only_these_names(std::vector<std::string> saved,
                                            std::vector<std::string> offloaded, MemoryKind src,
                                            MemoryKind dst) {
  for (const std::string& n : saved)
    if (listed(offloaded, n))
      throw ValueError(
          detail::str("save_and_offload_only_these_names: \"", n,
                      "\" is in both names_which_can_be_saved "
                      "and names_which_can_be_offloaded; the two sets must be disjoint"));
  check_offload_kinds("save_and_offload_only_these_names", src, dst);
  std::string label = detail::str("save_and_offload_only_these_names(", names_str("saved=", saved),
                                  ", ", names_str("offloaded=", offloaded), ")");
  return make(std::move(label), [=](const ir::Primitive& p, auto, const ir::Params& params) {
    const std::string* n = name_of(p, params);
    if (n != nullptr && listed(saved, *n)) return Decision::save();
    if (n != nullptr && listed(offloaded, *n)) return Decision::offload(src, dst);
    return Decision::recompute();
  });
}

PolicyPtr offload_dot_with_no_batch_dims(MemoryKind src, MemoryKind dst) {
  check_offload_kinds("offload_dot_with_no_batch_dims", src, dst);
  return make("offload_dot_with_no_batch_dims",
              [=](const ir::Primitive& p, auto, const ir::Params& params) {
                return is_dot_without_batch_dims(p, params) ? Decision::offload(src, dst)
                                                            : Decision::recompute();
              });
}

PolicyPtr save_from_both_policies(PolicyPtr p1, PolicyPtr p2) {
  if (!p1 || !p2) throw ValueError("save_from_both_policies: both policies must be given");
  if (is_none(p1) || is_none(p2))
    throw ValueError(
        "save_from_both_policies: none() is no policy (it means no checkpoint at all); pass two "
        "policies");
  std::string label = detail::str("save_from_both_policies(", p1->str(), ", ", p2->str(), ")");
  return make(std::move(label), [p1, p2](const ir::Primitive& p, std::span<const AVal> in,
                                         const ir::Params& params) {
    const Decision a = p1->decide(p, in, params), b = p2->decide(p, in, params);
    for (const Decision& d : {a, b})
      if (d.kind == Decision::Kind::offload)
        throw ValueError(detail::str(
            "save_from_both_policies: the policies must answer save or recompute, but one "
            "answered offload for ",
            p.name(),
            "; write a custom policy instead of "
            "combining offload policies"));
    return save_if(a.kind == Decision::Kind::save || b.kind == Decision::Kind::save);
  });
}

PolicyPtr custom(std::string name, PolicyFn fn) {
  if (!fn) throw ValueError("checkpoint_policies::custom: the policy function is empty");
  return make(std::move(name), std::move(fn));
}

PolicyPtr none() {
  // Never consulted (no region is made); were it asked, no remat keeps everything.
  static const PolicyPtr p = make("none", [](const ir::Primitive&, std::span<const AVal>,
                                             const ir::Params&) { return Decision::save(); });
  return p;
}

bool is_none(const PolicyPtr& policy) {
  return policy != nullptr && policy == none();
}

PolicyPtr from_name(std::string_view name) {
  static const std::pair<std::string_view, PolicyPtr (*)()> table[] = {
      {"none", &none},
      {"everything_saveable", &everything_saveable},
      {"nothing_saveable", &nothing_saveable},
      {"dots_saveable", &dots_saveable},
      {"checkpoint_dots", &checkpoint_dots},
      {"dots_with_no_batch_dims_saveable", &dots_with_no_batch_dims_saveable},
      {"checkpoint_dots_with_no_batch_dims", &checkpoint_dots_with_no_batch_dims},
  };
  std::string known;
  for (const auto& [n, f] : table) {
    if (n == name) return f();
    known += detail::str(known.empty() ? "" : ", ", n);
  }
  throw ValueError(detail::str(
      "unknown checkpoint policy \"", name, "\"; the policies without arguments are: ", known,
      " (save_only_these_names and the other name/offload policies take arguments)"));
}

}  // namespace flaxpp::checkpoint_policies
