// flaxpp/transforms/custom_vjp.hpp — functions with a hand-written VJP (jax.custom_vjp /
// custom_jvp's role): the forward function is traced into the graph as one
// custom_vjp_call equation (remat policies decide on it as a whole, as JAX's policies do on
// custom_jvp_call), and
// differentiation uses the given rule instead of differentiating the body.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "flaxpp/ir/primitive.hpp"
#include "flaxpp/transforms/trace.hpp"

namespace flaxpp {

// A named VJP rule, registered once (e.g. a function-local static) and referred to by name
// from custom_vjp_call equations.
class CustomVjpRule {
 public:
  // Registers the rule under `name`; a second live rule of the same name is a ValueError.
  CustomVjpRule(std::string name, ir::Primitive::VjpRule rule);
  ~CustomVjpRule();
  CustomVjpRule(const CustomVjpRule&) = delete;
  CustomVjpRule& operator=(const CustomVjpRule&) = delete;
  const std::string& name() const { return name_; }
  static const CustomVjpRule& find(const std::string& name);

 private:
  std::string name_;
  ir::Primitive::VjpRule rule_;
  friend std::vector<Array> custom_vjp_rule_apply(const ir::VjpArgs& args);
};

// The higher-order primitive: params "call" (the forward graph) and "rule" (a rule name).
extern const ir::Primitive custom_vjp_call_p;

// Applies `forward` to `inputs` with `rule` as its VJP. `static_params` are recorded on the
// equation for the rule to read (e.g. an axis).
std::vector<Array> custom_vjp_call(const CustomVjpRule& rule, const ArrayFn& forward,
                                   std::span<const Array> inputs,
                                   const ir::Params& static_params = {});

}  // namespace flaxpp
