// Private to the ir passes: where each variable of a graph is defined and read, the index the
// fusion passes consult.
#pragma once

#include <cstddef>
#include <vector>

#include "flaxpp/ir/graph.hpp"

namespace flaxpp::ir {

struct DefUse {
  std::vector<std::ptrdiff_t> producer;           // per variable: its equation, or -1
  std::vector<std::vector<std::size_t>> readers;  // per variable: the equations reading it
  std::vector<bool> output;                       // per variable: whether the graph returns it

  explicit DefUse(const Graph& g)
      : producer(g.num_vars(), -1), readers(g.num_vars()), output(g.num_vars(), false) {
    for (std::size_t i = 0; i < g.eqns.size(); ++i) {
      for (const VarId v : g.eqns[i].outputs)
        producer[static_cast<std::size_t>(v)] = static_cast<std::ptrdiff_t>(i);
      for (const Atom& a : g.eqns[i].inputs)
        if (!a.is_literal()) readers[static_cast<std::size_t>(a.var)].push_back(i);
    }
    for (const Atom& a : g.outvars)
      if (!a.is_literal()) output[static_cast<std::size_t>(a.var)] = true;
  }
};

}  // namespace flaxpp::ir
