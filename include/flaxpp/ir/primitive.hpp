// flaxpp/ir/primitive.hpp — a primitive operation (named as in jax.lax) and its rules, all
// given at its one definition site: the shape/dtype rule, and the VJP rule written with
// flaxpp operations (so it traces into the backward graph). Backends implement evaluation and
// register it here.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/aval.hpp"
#include "flaxpp/ir/params.hpp"

namespace flaxpp::ir {

// What a VJP rule receives: the equation's primal inputs and outputs (traced arrays in the
// joint forward/backward trace), its parameters, and the cotangents of its outputs (an
// invalid Array is a symbolic zero).
struct VjpArgs {
  std::span<const Array> inputs;
  std::span<const Array> outputs;
  const Params& params;
  std::span<const Array> cotangents;
};

class Primitive {
 public:
  // Output avals from input avals and params; throws ValueError for bad inputs, naming the
  // primitive, what it expected and what it got.
  using ShapeRule =
      std::function<std::vector<AVal>(std::span<const AVal> inputs, const Params& params)>;
  // Cotangents of the inputs (invalid Array = zero / not differentiable), one per input.
  using VjpRule = std::function<std::vector<Array>(const VjpArgs& args)>;
  // Eager evaluation in terms of other primitives (JAX's def_impl), for higher-order
  // primitives such as remat whose body is a graph; others are evaluated by the backends.
  using Impl =
      std::function<std::vector<Array>(std::span<const Array> inputs, const Params& params)>;

  Primitive(std::string name, ShapeRule shape_rule, VjpRule vjp_rule = {}, Impl impl = {})
      : name_(std::move(name)),
        shape_rule_(std::move(shape_rule)),
        vjp_rule_(std::move(vjp_rule)),
        impl_(std::move(impl)) {}
  Primitive(const Primitive&) = delete;
  Primitive& operator=(const Primitive&) = delete;

  const std::string& name() const { return name_; }
  std::vector<AVal> shape_rule(std::span<const AVal> inputs, const Params& params) const {
    return shape_rule_(inputs, params);
  }
  bool has_vjp() const { return static_cast<bool>(vjp_rule_); }
  std::vector<Array> vjp(const VjpArgs& args) const;
  const Impl& impl() const { return impl_; }

 private:
  std::string name_;
  ShapeRule shape_rule_;
  VjpRule vjp_rule_;
  Impl impl_;
};

// Applies `prim` to `inputs`. While a function is being traced (a trace is active on this
// thread), the innermost active trace records it — even when every input is concrete, so
// that constant computations inside a traced region are part of its graph (JAX's
// omnistaging). Otherwise the backend of the inputs' device evaluates it now (eager mode).
std::vector<Array> bind(const Primitive& prim, std::span<const Array> inputs,
                        const Params& params = {});
Array bind1(const Primitive& prim, std::span<const Array> inputs, const Params& params = {});

// Eager evaluation of one primitive on concrete arrays: the shape rule, the device (the GPU
// of any GPU input, else the CPU; host inputs are copied there), then the implementation
// registered for the primitive on that device kind, else that kind's evaluator.
std::vector<Array> eval_primitive(const Primitive& prim, std::span<const Array> inputs,
                                  const Params& params);

// How primitives are evaluated on a device kind: `inputs` are concrete arrays on one device of
// that kind, accepted by the shape rule, whose results are `out_avals`.
using Evaluator = std::vector<Array> (*)(const Primitive& prim, std::span<const Array> inputs,
                                         const Params& params, std::span<const AVal> out_avals);
// The evaluator of every primitive on `kind`: the backends layer registers its built-in
// backends' as the program starts (backend/registry.cpp).
void register_evaluator(DeviceKind kind, Evaluator evaluator);
// One primitive's implementation on `kind`, before the kind's evaluator: how a primitive
// defined outside flaxpp's table gets its CPU and CUDA kernels (docs/EXTENDING.md). Register
// before evaluating the primitive; not thread-safe with evaluation.
void register_impl(const Primitive& prim, DeviceKind kind, Evaluator impl);

// Called before each eager evaluation of a primitive, to move work in flight on: dist's
// started collectives, which MPI advances only inside its calls. One hook (null: none); set
// before evaluating.
void set_progress_hook(void (*hook)());

// The trace side of bind: implemented by the transforms layer's traces.
class TraceBase {
 public:
  virtual ~TraceBase() = default;
  virtual std::vector<Array> process(const Primitive& prim, std::span<const Array> inputs,
                                     const Params& params) = 0;
  // Nesting level: 1 for the outermost active trace.
  int level() const { return level_; }

 private:
  friend class ActiveTrace;
  int level_ = 0;
};

// Makes `trace` the innermost active trace of this thread for the guard's lifetime.
class ActiveTrace {
 public:
  explicit ActiveTrace(TraceBase& trace);
  ~ActiveTrace();
  ActiveTrace(const ActiveTrace&) = delete;
  ActiveTrace& operator=(const ActiveTrace&) = delete;

 private:
  TraceBase* trace_;
};

// The innermost active trace of this thread, or nullptr (eager mode).
TraceBase* current_trace();
// The trace a tracer belongs to (the transforms layer's tracers derive from this).
class TracerBase : public Tracer {
 public:
  virtual TraceBase& trace() const = 0;
};

}  // namespace flaxpp::ir
