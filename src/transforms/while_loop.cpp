// while_loop() and fori_loop(): the while primitive (its shape rule, its eager evaluation,
// which reads the predicate on the host once per iteration, and its VJP rule, an error as in
// JAX), and fori_loop as a scan or a while_loop.
#include "flaxpp/transforms/while_loop.hpp"

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/primitive_rules.hpp"
#include "flaxpp/transforms/scan.hpp"
#include "flaxpp/transforms/trace.hpp"

namespace flaxpp::lax {
namespace {

struct WhileShape {
  const ir::Graph &cond, &body;
  std::size_t cond_nconsts, body_nconsts;
};

WhileShape while_shape(const ir::Params& params) {
  return {*params.get<std::shared_ptr<const ir::Graph>>("cond_jaxpr"),
          *params.get<std::shared_ptr<const ir::Graph>>("body_jaxpr"),
          static_cast<std::size_t>(params.get<std::int64_t>("cond_nconsts")),
          static_cast<std::size_t>(params.get<std::int64_t>("body_nconsts"))};
}

std::vector<AVal> while_avals(std::span<const AVal> in, const ir::Params& params) {
  const WhileShape w = while_shape(params);
  const std::size_t first_carry = w.cond_nconsts + w.body_nconsts;
  FLAXPP_ASSERT(w.cond.invars.size() == w.cond_nconsts + in.size() - first_carry &&
                    w.body.invars.size() == w.body_nconsts + in.size() - first_carry,
                "while: ", in.size(), " operands do not match its graphs' inputs");
  std::vector<AVal> carry(in.begin() + static_cast<std::ptrdiff_t>(first_carry), in.end());
  for (std::size_t i = 0; i < w.cond.invars.size(); ++i)
    FLAXPP_ASSERT(
        w.cond.aval(w.cond.invars[i]) == (i < w.cond_nconsts ? in[i] : carry[i - w.cond_nconsts]),
        "while: operand ", i, " does not match the predicate's input");
  for (std::size_t i = 0; i < w.body.invars.size(); ++i)
    FLAXPP_ASSERT(w.body.aval(w.body.invars[i]) ==
                      (i < w.body_nconsts ? in[w.cond_nconsts + i] : carry[i - w.body_nconsts]),
                  "while: operand ", w.cond_nconsts + i, " does not match the body's input");
  return carry;
}

std::vector<Array> run_while(std::span<const Array> in, const ir::Params& params) {
  const WhileShape w = while_shape(params);
  const std::span<const Array> cond_consts = in.subspan(0, w.cond_nconsts);
  const std::span<const Array> body_consts = in.subspan(w.cond_nconsts, w.body_nconsts);
  std::vector<Array> carry(
      in.begin() + static_cast<std::ptrdiff_t>(w.cond_nconsts + w.body_nconsts), in.end());
  auto with = [&](std::span<const Array> consts) {
    std::vector<Array> args(consts.begin(), consts.end());
    args.insert(args.end(), carry.begin(), carry.end());
    return args;
  };
  while (eval_graph(w.cond, with(cond_consts))[0].item<bool>())
    carry = eval_graph(w.body, with(body_consts));
  return carry;
}

std::vector<Array> while_vjp(const ir::VjpArgs&) {
  throw ValueError(
      "Reverse-mode differentiation does not work for lax::while_loop or lax::fori_loop with "
      "bounds known only at run time: the number of iterations, and so what the backward pass "
      "must keep, is not known when the step is traced. Use lax::fori_loop with static bounds, "
      "or scan, which differentiate");
}

std::string avals_str(std::span<const Array> xs) {
  std::string s = "(";
  for (std::size_t j = 0; j < xs.size(); ++j)
    s += (j ? ", " : "") + (xs[j].valid() ? xs[j].aval().str() : std::string("null"));
  return s + ")";
}

// Throws unless `next` has the shapes and dtypes of `init`, naming `who`'s body.
void check_carry(const char* who, std::span<const Array> init, std::span<const Array> next) {
  bool same = next.size() == init.size();
  for (std::size_t k = 0; same && k < next.size(); ++k)
    same = next[k].valid() && next[k].aval() == init[k].aval();
  if (!same)
    throw ValueError(detail::str(who, ": body_fun must return the carry's shapes and dtypes, ",
                                 avals_str(init), ", but returned ", avals_str(next)));
}

}  // namespace

const ir::Primitive while_p("while", while_avals, while_vjp, run_while);

namespace {
// A loop over its body that reads its predicate on the host every iteration.
const bool while_rules_registered = [] {
  ir::register_effects(while_p, {.host_sync = true});
  ir::register_loop(while_p, "body_jaxpr");
  return true;
}();
}  // namespace

std::vector<Array> while_loop(const LoopCond& cond_fun, const LoopBody& body_fun,
                              std::span<const Array> init_val) {
  std::vector<AVal> avals;
  for (std::size_t k = 0; k < init_val.size(); ++k) {
    if (!init_val[k].valid())
      throw ValueError(detail::str("while_loop: init_val[", k, "] is a null Array"));
    avals.push_back(init_val[k].aval());
  }
  ir::Graph cond = make_graph(
      [&](std::span<const Array> carry) {
        const Array p = cond_fun(carry);
        if (!p.valid() || p.aval() != AVal{Shape{}, DType::bool_})
          throw ValueError(
              detail::str("while_loop: cond_fun must return a bool scalar, got ",
                          p.valid() ? p.aval().str() : std::string("a null Array"),
                          "; compare, e.g. with less(), and reduce with all() or any() if needed"));
        return std::vector<Array>{p};
      },
      avals);
  ir::Graph body = make_graph(
      [&](std::span<const Array> carry) {
        std::vector<Array> next = body_fun(carry);
        check_carry("while_loop", init_val, next);
        return next;
      },
      avals);
  std::vector<Array> operands = close_over_consts(cond);
  const auto cond_nconsts = static_cast<std::int64_t>(operands.size());
  const std::vector<Array> body_consts = close_over_consts(body);
  operands.insert(operands.end(), body_consts.begin(), body_consts.end());
  operands.insert(operands.end(), init_val.begin(), init_val.end());
  return ir::bind(while_p, operands,
                  {{"cond_jaxpr", std::make_shared<const ir::Graph>(std::move(cond))},
                   {"body_jaxpr", std::make_shared<const ir::Graph>(std::move(body))},
                   {"cond_nconsts", cond_nconsts},
                   {"body_nconsts", static_cast<std::int64_t>(body_consts.size())}});
}

std::vector<Array> fori_loop(std::int32_t lower, std::int32_t upper, const ForiBody& body_fun,
                             std::span<const Array> init_val) {
  // JAX: scan over (i, carry) for upper - lower iterations.
  std::vector<Array> init{Array::scalar(lower)};
  init.insert(init.end(), init_val.begin(), init_val.end());
  const ScanBody step = [&](std::span<const Array> c, std::span<const Array>) {
    ScanResult r;
    r.carry.push_back(add(c[0], scalar(1.0, DType::i32)));
    const std::vector<Array> next = body_fun(c[0], c.subspan(1));
    check_carry("fori_loop", init_val, next);
    r.carry.insert(r.carry.end(), next.begin(), next.end());
    return r;
  };
  const std::int64_t length = std::max<std::int64_t>(0, std::int64_t{upper} - lower);
  ScanResult r = scan(step, init, {}, length);
  r.carry.erase(r.carry.begin());
  return std::move(r.carry);
}

std::vector<Array> fori_loop(const Array& lower, const Array& upper, const ForiBody& body_fun,
                             std::span<const Array> init_val) {
  for (const Array* b : {&lower, &upper})
    if (!b->valid() || b->aval() != AVal{Shape{}, DType::i32})
      throw ValueError(detail::str("fori_loop: the bounds must be int32 scalars, got ",
                                   b->valid() ? b->aval().str() : std::string("a null Array")));
  // JAX: while_loop over (i, upper, carry).
  std::vector<Array> init{lower, upper};
  init.insert(init.end(), init_val.begin(), init_val.end());
  const LoopCond more = [](std::span<const Array> c) { return lt(c[0], c[1]); };
  const LoopBody step = [&](std::span<const Array> c) {
    std::vector<Array> next{add(c[0], scalar(1.0, DType::i32)), c[1]};
    const std::vector<Array> carry = body_fun(c[0], c.subspan(2));
    check_carry("fori_loop", init_val, carry);
    next.insert(next.end(), carry.begin(), carry.end());
    return next;
  };
  std::vector<Array> out = while_loop(more, step, init);
  out.erase(out.begin(), out.begin() + 2);
  return out;
}

}  // namespace flaxpp::lax
