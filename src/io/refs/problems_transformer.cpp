// Reference problems of the transformer family (refs-format.md, "Transformers"): embed,
// attention, block_grad, stack_init, stack_grad, and the block_loss function of
// saved_residuals. (lm_train, a trajectory, is in problems_train.cpp.)
#include "flaxpp/nn/embed.hpp"
#include "flaxpp/nn/language_model.hpp"
#include "flaxpp/nn/multi_head_attention.hpp"
#include "flaxpp/nn/remat.hpp"
#include "flaxpp/nn/transformer_block.hpp"
#include "io/refs/problems_shared.hpp"

namespace flaxpp::refs {
namespace {

// The inputs of Block's problems: x f32[B,T,D] and the block's sizes.
struct BlockInputs {
  random::Key key;
  Array x;
  nn::TransformerBlock block;
};

BlockInputs block_inputs(const Inputs& in, const CaseContext& cx) {
  const Array x = float_input(in, "x", cx, 3);
  if (x.rank() != 3)
    throw InputError(detail::str(in.path(), ".x: expected float32 data [B, T, D], got ", x.aval()));
  return {random::key(in.integer("seed"), cx.mode), x,
          nn::TransformerBlock{.num_heads = positive_integer(in, "num_heads"),
                               .mlp_dim = positive_integer(in, "mlp_dim")}};
}

// refs-format's Stack(num_layers, num_heads, mlp_dim, policy) of a stack_* case.
std::pair<nn::Model<nn::TransformerStack>, BlockInputs> stack_inputs(const Inputs& in,
                                                                     const CaseContext& cx) {
  BlockInputs b = block_inputs(in, cx);
  const nn::TransformerStack stack{.num_layers = positive_integer(in, "num_layers"),
                                   .num_heads = b.block.num_heads,
                                   .mlp_dim = b.block.mlp_dim,
                                   .policy = policy_input(in)};
  return {nn::Model(stack), std::move(b)};
}

}  // namespace

LeavesLoss block_loss(const Inputs& in, const CaseContext& cx) {
  const BlockInputs b = block_inputs(in, cx);
  const nn::Model model(b.block);
  return sum_of_squares_of_leaves(model, model.init(b.key, b.x)["params"], b.x);
}

void register_transformer_problems(ProblemRegistry& registry) {
  registry.add("embed", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const Array tokens = in.array("tokens");
    if (tokens.dtype() != DType::i32)
      throw InputError(
          detail::str(in.path(), ".tokens: expected int32 token ids, got ", tokens.aval()));
    const nn::Model model(nn::Embed{.num_embeddings = positive_integer(in, "num_embeddings"),
                                    .features = positive_integer(in, "features")});
    const Array t = tokens.to(cx.device);
    return Tree(model.apply(model.init(random::key(in.integer("seed"), cx.mode), t), t));
  });
  registry.add("attention", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const Array x = float_input(in, "x", cx, 3);
    if (x.rank() != 3)
      throw InputError(
          detail::str(in.path(), ".x: expected float32 data [B, T, D], got ", x.aval()));
    if (!in.has("causal"))
      throw InputError(detail::str(in.path(), ".causal: missing (true or false)"));
    const double rate = in.number("dropout_rate", 0.0);
    const nn::Model model(nn::MultiHeadDotProductAttention{
        .num_heads = positive_integer(in, "num_heads"), .dropout_rate = rate});
    // The mask of nn.make_causal_mask(ones((B, T))), at init and apply alike.
    nn::AttentionArgs args{
        .mask = in.boolean("causal", false)
                    ? nn::make_causal_mask(zeros(Shape{x.shape()[0], x.shape()[1]}, DType::i32))
                    : Array()};
    if (rate > 0.0) args.deterministic = true;  // init draws no dropout key
    const nn::Variables v = model.init(random::key(in.integer("seed"), cx.mode), x, args);
    nn::RngStreams rngs;
    if (rate > 0.0) {
      if (!in.has("dropout_seed"))
        throw InputError(
            detail::str(in.path(), ".dropout_seed: missing (required with a dropout_rate > 0)"));
      args.deterministic = false;
      rngs.insert_or_assign("dropout", random::key(in.integer("dropout_seed"), cx.mode));
    }
    return Tree{{"params", v["params"]}, {"y", model.apply_with_rngs(v, rngs, x, args)}};
  });
  registry.add("block_grad", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const BlockInputs b = block_inputs(in, cx);
    auto run = [&](const auto& model) {
      const ValueAndGrad r = sum_of_squares_grad(model, model.init(b.key, b.x)["params"], b.x);
      return Tree{{"loss", r.value}, {"grads", Tree{{"params", r.grads[0]}}}};
    };
    // lifted(policy): nn.remat(Block, policy=..., prevent_cse=False), or the Block for "none".
    return run(remat<nn::TransformerBlock>(policy_input(in), {}, false)(b.block));
  });
  registry.add("stack_init", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const auto [stack, b] = stack_inputs(in, cx);
    return Tree{{"params", stack.init(b.key, b.x)["params"]}};
  });
  registry.add("stack_grad", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const auto [stack, b] = stack_inputs(in, cx);
    const ValueAndGrad r = sum_of_squares_grad(stack, stack.init(b.key, b.x)["params"], b.x);
    return Tree{{"loss", r.value}, {"grads", Tree{{"params", r.grads[0]}}}};
  });
}

}  // namespace flaxpp::refs
