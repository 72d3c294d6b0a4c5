// The problem registry: name → function, filled by one registration function per family.
#include <algorithm>

#include "flaxpp/io/refs.hpp"

namespace flaxpp::refs {

const ProblemRegistry& ProblemRegistry::builtin() {
  static const ProblemRegistry registry = [] {
    ProblemRegistry r;
    register_random_problems(r);
    register_remat_problems(r);
    register_nn_problems(r);
    register_train_problems(r);
    register_transformer_problems(r);
    register_control_flow_problems(r);
    register_jnp_problems(r);
    register_vmap_problems(r);
    register_cnn_problems(r);
    return r;
  }();
  return registry;
}

void ProblemRegistry::add(std::string name, Problem problem) {
  FLAXPP_ASSERT(find(name) == nullptr, "problem registered twice: ", name);
  problems_.emplace_back(std::move(name), std::move(problem));
}

const Problem* ProblemRegistry::find(std::string_view name) const {
  const auto it = std::find_if(problems_.begin(), problems_.end(),
                               [&](const auto& p) { return p.first == name; });
  return it == problems_.end() ? nullptr : &it->second;
}

std::vector<std::string> ProblemRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& p : problems_)
    out.push_back(p.first);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace flaxpp::refs
