// nnx::Rngs and nnx::Linear.
#include "flaxpp/nn/nnx.hpp"

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"

namespace flaxpp::nnx {

Rngs::Rngs(std::int64_t seed) {
  streams_.emplace("default", Stream{random::key(seed)});
}

Rngs::Rngs(std::map<std::string, random::Key> streams) {
  for (auto& [name, key] : streams)
    streams_.emplace(name, Stream{key});
}

random::Key Rngs::operator()(const std::string& stream) {
  auto it = streams_.find(stream);
  if (it == streams_.end()) it = streams_.find("default");
  if (it == streams_.end())
    throw ValueError(detail::str("nnx::Rngs has no stream \"", stream,
                                 "\" and no \"default\" stream to fall back "
                                 "on; create it with Rngs(seed) or Rngs({{\"",
                                 stream, "\", key}})"));
  return random::fold_in(it->second.key, it->second.count++);
}

Linear::Linear(std::int64_t in_features, std::int64_t out_features, Rngs& rngs,
               const LinearOptions& o) {
  if (in_features <= 0 || out_features <= 0)
    throw ValueError(detail::str("nnx::Linear: in_features and out_features must be > 0, got ",
                                 in_features, " and ", out_features));
  kernel_ = o.kernel_init(rngs.params(), Shape{in_features, out_features}, o.param_dtype);
  if (o.use_bias) bias_ = o.bias_init(rngs.params(), Shape{out_features}, o.param_dtype);
}

Array Linear::operator()(const Array& x) const {
  if (x.rank() == 0 || x.shape()[-1] != kernel_.shape()[0])
    throw ValueError(detail::str("nnx::Linear: expected an input (..., ", kernel_.shape()[0],
                                 "), got ", x.aval()));
  Array y = lax::dot_general(x, kernel_, {{x.rank() - 1}, {0}, {}, {}});
  if (bias_.valid()) y = y + bias_;
  return y;
}

Tree Linear::state() const {
  Tree t{{"kernel", kernel_}};
  if (bias_.valid()) t.set("bias", bias_);
  return t;
}

Linear Linear::with_state(const Tree& state) const {
  Linear out;
  out.kernel_ = state["kernel"].array();
  if (bias_.valid()) out.bias_ = state["bias"].array();
  if (out.kernel_.aval() != kernel_.aval() || (bias_.valid() && out.bias_.aval() != bias_.aval()))
    throw ValueError(
        detail::str("nnx::Linear::with_state: the state's avals differ from the module's (kernel ",
                    kernel_.aval(), ")"));
  return out;
}

}  // namespace flaxpp::nnx
