// GraphTrace: the trace that records every bound primitive into a Graph (JAX's
// DynamicJaxprTrace), and its tracers. Private to the transforms layer.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <tuple>
#include <vector>

#include "flaxpp/ir/graph.hpp"

namespace flaxpp::transforms {

class GraphTrace final : public ir::TraceBase {
 public:
  GraphTrace();
  ~GraphTrace() override;

  // A new graph input of the given aval, as a tracer.
  Array new_input(const AVal& aval);
  std::vector<Array> process(const ir::Primitive& prim, std::span<const Array> inputs,
                             const ir::Params& params) override;
  // Sets the graph's outputs and hands the graph over; the trace's tracers are dead after.
  ir::Graph finish(std::span<const Array> outputs);

 private:
  class Tracer;
  ir::Atom atom_for(const Array& x);
  Array make_tracer(ir::VarId var);

  ir::Graph graph_;
  std::shared_ptr<bool> alive_;
  // Lifted values -> their constvar, so each is lifted once: keyed by the buffer or outer
  // tracer and the aval (two arrays may view one buffer with different shapes).
  std::map<std::tuple<const void*, std::vector<std::int64_t>, DType>, ir::VarId> lifted_;
};

}  // namespace flaxpp::transforms
