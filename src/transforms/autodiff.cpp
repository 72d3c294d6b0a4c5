// Reverse-mode AD, as JAX does it: trace the function, replay it into a joint
// forward/backward trace applying each primitive's VJP rule in reverse (flaxpp/transforms/tape.hpp;
// checkpoint regions by their own rule, checkpoint_ad.cpp), then split the joint graph by
// partial evaluation into the forward part (run now; it yields the outputs and the residuals)
// and the backward part (run when the cotangents come) (transforms/linearize.hpp). This file
// runs the two parts: vjp, CompiledVjp and value_and_grad.
#include "flaxpp/transforms/autodiff.hpp"

#include "flaxpp/ir/lax.hpp"

#include "transforms/linearize.hpp"

namespace flaxpp {
namespace {

// What one call's backward pass needs: the shared linearisation and this call's residuals.
struct Backward {
  std::shared_ptr<const Linearized> lin;
  std::vector<Array> residuals, known_cts;
  bool spent = false;

  // Input cotangents, each handed to `sink` (zeros for inputs the outputs do not depend on,
  // and for inputs marked not differentiable unless `skip_marked`): from the backward graph as
  // soon as final, then those the forward part computed.
  void run_into(std::span<const Array> cotangents, bool release, const OutputSink& sink,
                bool skip_marked = false) {
    if (spent)
      throw ValueError(
          "vjp: the backward pass was already run with backward_once, which frees its residuals");
    const auto& out_avals = lin->output_avals;
    if (cotangents.size() != out_avals.size())
      throw ValueError(detail::str("vjp backward: expected ", out_avals.size(), " cotangents, got ",
                                   cotangents.size()));
    for (std::size_t k = 0; k < cotangents.size(); ++k)
      if (cotangents[k].aval() != out_avals[k])
        throw ValueError(detail::str("vjp backward: cotangent ", k, " must be ", out_avals[k],
                                     " like the output, got ", cotangents[k].aval()));
    // Checked first, so that bad cotangents leave the residuals for another try.
    std::vector<Array> args = release ? std::move(residuals) : residuals;
    std::vector<Array> known = release ? std::move(known_cts) : known_cts;
    spent = release;
    args.insert(args.end(), cotangents.begin(), cotangents.end());
    eval_graph(lin->pe.unknown, std::move(args),
               [&](std::size_t k, Array ct) { sink(lin->unknown_input[k], std::move(ct)); });
    std::size_t next_known = 0;
    std::size_t slot = out_avals.size();
    for (std::size_t i = 0; i < lin->primal_avals.size(); ++i) {
      if (!lin->nonzero[i]) {
        if (!(skip_marked && !lin->differentiable[i]))
          sink(i, Array::full(lin->primal_avals[i].shape, 0.0, lin->primal_avals[i].dtype,
                              lin->device ? *lin->device : default_device()));
        continue;
      }
      if (lin->pe.output_known[slot]) sink(i, std::move(known[next_known++]));
      ++slot;
    }
  }

  std::vector<Array> run(std::span<const Array> cotangents, bool release) {
    std::vector<Array> input_cts(lin->primal_avals.size());
    run_into(cotangents, release, [&](std::size_t i, Array ct) { input_cts[i] = std::move(ct); });
    return input_cts;
  }
};

}  // namespace

CompiledVjp::CompiledVjp(const ArrayFn& f, std::span<const AVal> avals,
                         std::vector<bool> differentiable)
    : lin_(std::make_shared<const Linearized>(linearize(f, avals, std::move(differentiable)))) {}

const std::vector<AVal>& CompiledVjp::output_avals() const {
  return lin_->output_avals;
}

CompiledVjp CompiledVjp::on(Device device) const {
  auto lin = std::make_shared<Linearized>(*lin_);
  lin->pe.known = ir::with_constants_on(lin->pe.known, device);
  lin->pe.unknown = ir::with_constants_on(lin->pe.unknown, device);
  lin->device = device;
  return CompiledVjp(std::move(lin));
}

VjpResult CompiledVjp::operator()(std::span<const Array> primals) const {
  if (primals.size() != lin_->primal_avals.size())
    throw ValueError(detail::str("compiled vjp: traced for ", lin_->primal_avals.size(),
                                 " inputs, called with ", primals.size()));
  for (std::size_t i = 0; i < primals.size(); ++i)
    if (primals[i].aval() != lin_->primal_avals[i])
      throw ValueError(detail::str("compiled vjp: input ", i, " was traced as ",
                                   lin_->primal_avals[i], ", got ", primals[i].aval(),
                                   "; trace again for new shapes"));
  // Forward: outputs, cotangents that need no cotangent input (e.g. constants), residuals.
  std::vector<Array> known_out = eval_graph(lin_->pe.known, primals);
  const std::size_t num_known = known_out.size() - lin_->pe.num_residuals;
  auto state = std::make_shared<Backward>();
  state->lin = lin_;
  state->residuals.assign(
      std::make_move_iterator(known_out.begin() + static_cast<std::ptrdiff_t>(num_known)),
      std::make_move_iterator(known_out.end()));
  state->known_cts.assign(known_out.begin() + static_cast<std::ptrdiff_t>(lin_->num_outputs),
                          known_out.begin() + static_cast<std::ptrdiff_t>(num_known));
  VjpResult result;
  result.outputs.assign(known_out.begin(),
                        known_out.begin() + static_cast<std::ptrdiff_t>(lin_->num_outputs));
  for (const Array& r : state->residuals)
    result.residual_bytes += r.nbytes();
  result.backward_graph = std::shared_ptr<const ir::Graph>(lin_, &lin_->pe.unknown);
  result.backward = [state](std::span<const Array> cts) { return state->run(cts, false); };
  result.backward_once = [state](std::span<const Array> cts) { return state->run(cts, true); };
  result.backward_into = [state](std::span<const Array> cts, const OutputSink& sink) {
    state->run_into(cts, true, sink, /*skip_marked=*/true);
  };
  return result;
}

VjpResult vjp(const ArrayFn& f, std::span<const Array> primals) {
  std::vector<AVal> avals;
  for (const Array& p : primals)
    avals.push_back(p.aval());
  return CompiledVjp(f, avals)(primals);
}

ValueAuxAndGrad value_and_grad_with_aux(const TreeLossAuxFn& f, std::span<const Tree> args,
                                        std::span<const int> argnums) {
  std::vector<std::vector<Array>> leaves;
  for (const Tree& t : args)
    leaves.push_back(t.leaves());
  std::vector<Array> primals;
  for (int a : argnums) {
    if (a < 0 || static_cast<std::size_t>(a) >= args.size())
      throw ValueError(detail::str("value_and_grad: argnum ", a, " is out of range for ",
                                   args.size(), " arguments"));
    for (const Array& leaf : leaves[static_cast<std::size_t>(a)]) {
      if (!is_floating(leaf.dtype()))
        throw ValueError(
            detail::str("value_and_grad: argument ", a, " has a ", dtype_name(leaf.dtype()),
                        " leaf; only floating inputs can be differentiated (pass it in an argument "
                        "not listed in argnums)"));
      primals.push_back(leaf);
    }
  }
  Tree aux_structure;
  auto flat = [&](std::span<const Array> xs) {
    std::vector<Tree> trees(args.begin(), args.end());
    std::size_t next = 0;
    for (int a : argnums) {
      const std::size_t count = leaves[static_cast<std::size_t>(a)].size();
      trees[static_cast<std::size_t>(a)] =
          args[static_cast<std::size_t>(a)].with_leaves(xs.subspan(next, count));
      next += count;
    }
    auto [loss, aux] = f(trees);
    if (!loss.valid() || loss.rank() != 0 || !is_floating(loss.dtype()))
      throw ValueError(detail::str(
          "value_and_grad: the function must return a scalar (0-d) floating array, got ",
          loss.valid() ? loss.aval().str() : std::string("a null Array"),
          "; reduce it, e.g. with sum() or mean()"));
    // The auxiliary values are results too, held out of differentiation (has_aux).
    std::vector<Array> out{loss};
    for (const Array& leaf : aux.leaves())
      out.push_back(lax::stop_gradient(leaf));
    aux_structure = std::move(aux);
    return out;
  };
  VjpResult r = vjp(flat, primals);
  std::vector<Array> seeds{Array::full(Shape{}, 1.0, r.outputs[0].dtype())};
  for (std::size_t k = 1; k < r.outputs.size(); ++k)
    seeds.push_back(lax::zeros_like(r.outputs[k]));
  const std::vector<Array> cts = r.backward_once(seeds);
  ValueAuxAndGrad out{
      r.outputs[0], aux_structure.with_leaves(std::span<const Array>(r.outputs).subspan(1)), {}};
  std::size_t next = 0;
  for (int a : argnums) {
    const std::size_t count = leaves[static_cast<std::size_t>(a)].size();
    out.grads.push_back(args[static_cast<std::size_t>(a)].with_leaves(
        std::span<const Array>(cts).subspan(next, count)));
    next += count;
  }
  return out;
}

ValueAndGrad value_and_grad(const TreeLossFn& f, std::span<const Tree> args,
                            std::span<const int> argnums) {
  ValueAuxAndGrad r = value_and_grad_with_aux(
      [&f](std::span<const Tree> a) {
        return std::pair<Array, Tree>{f(a), Tree()};
      },
      args, argnums);
  return {std::move(r.value), std::move(r.grads)};
}

}  // namespace flaxpp
