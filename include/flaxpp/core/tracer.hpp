// flaxpp/core/tracer.hpp — the hook that lets an Array stand for a value being traced rather
// than a concrete buffer. The transforms layer implements tracers; the core only knows that
// a tracer belongs to a trace with a nesting level (inner traces have higher levels).
#pragma once

namespace flaxpp {

class Tracer {
 public:
  virtual ~Tracer() = default;
  // Nesting depth of the trace this tracer belongs to (1 = outermost).
  virtual int level() const = 0;
};

}  // namespace flaxpp
