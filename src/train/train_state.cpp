// TrainState and the classifier step, jitted.
#include "flaxpp/train/train_state.hpp"

#include <algorithm>

#include "flaxpp/dist/all_reduce.hpp"
#include "flaxpp/dist/communicator.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/optim/losses.hpp"
#include "flaxpp/transforms/autodiff.hpp"

namespace flaxpp::train {
namespace {

// A 0-d result on the host as float (a bf16 model's loss is bf16).
float host_float(const Array& x) {
  return astype(x, DType::f32).item<float>();
}

}  // namespace

Tree TrainState::to_tree() const {
  Tree out{{"params", params},
           {"opt_state", opt_state},
           {"step", Array::scalar(static_cast<std::int32_t>(step))}};
  if (!batch_stats.leaves().empty()) out.set("batch_stats", batch_stats);
  return out;
}

TrainState TrainState::from_tree(const Tree& tree) {
  for (const char* key : {"params", "opt_state", "step"})
    if (!tree.contains(key))
      throw ValueError(detail::str(
          "a train-state checkpoint needs \"params\", \"opt_state\" and \"step\"; \"", key,
          tree.is_leaf() ? "\" is missing (its root is an array)" : "\" is missing"));
  const Tree& step = tree["step"];
  const auto bad_step = [&](const std::string& got) {
    return ValueError(detail::str("a train-state checkpoint's \"step\" must be an int32 scalar ",
                                  "(shape []) >= 0, got ", got,
                                  "; the checkpoint is corrupt or is not a train state"));
  };
  if (!step.is_leaf()) throw bad_step(detail::str("a dict with ", step.size(), " keys"));
  const Array& s = step.array();
  if (s.dtype() != DType::i32 || s.rank() != 0) throw bad_step(s.aval().str());
  const std::int32_t value = s.to_vector<std::int32_t>()[0];
  if (value < 0) throw bad_step(std::to_string(value));
  return {tree["params"], tree["opt_state"], value,
          tree.contains("batch_stats") ? tree["batch_stats"] : Tree()};
}

TrainState ClassifierStep::restore(const Tree& checkpoint) const {
  TrainState state = TrainState::from_tree(checkpoint);
  optim::check_state(tx_, state.params, state.opt_state);
  return state;
}

namespace {

// The weight of this process's shard in the global batch's mean: its rows over every
// process's (one int32 collective); 1 for one process.
double shard_weight(dist::Communicator* comm, std::int64_t rows) {
  if (comm == nullptr || comm->size() == 1) return 1.0;
  const Array mine = Array::from_vector(std::vector<std::int32_t>{static_cast<std::int32_t>(rows)},
                                        Shape{}, Device::cpu());
  const std::int64_t total = comm->all_reduce(mine, dist::ReduceOp::sum).item<std::int32_t>();
  if (total == 0) throw ValueError("a data-parallel step over batches of no rows on every process");
  return static_cast<double>(rows) / static_cast<double>(total);
}

// The whole data set's mean from this process's shard mean `value` and the shard's weight `w`
// (shard_weight): the sum over processes of value * w; `value` itself for one process.
Array global_mean(dist::Communicator* comm, const Array& value, double w) {
  if (comm == nullptr || comm->size() == 1) return value;
  return comm->all_reduce(astype(value * w, value.dtype()), dist::ReduceOp::sum);
}

// A shard's mean weighted by its share of the global batch, in the mean's dtype.
Array weighted(const Array& value, const Array& weight) {
  return astype(value * weight, value.dtype());
}

// The global batch's mean from each process's shard mean: the sum over processes of
// value * weight (the identity for one process).
Array across_shards(const Array& value, const Array* weight) {
  if (weight == nullptr) return value;
  return dist::all_reduce(weighted(value, *weight), dist::ReduceOp::sum);
}

// DDP's gradient buckets: consecutive leaves of up to 25 MiB are reduced by one collective,
// the first bucket (the last layers', final first) of up to 1 MiB, so that its exchange starts
// early in the backward pass (DDP's bucket_cap_mb and first-bucket size).
constexpr std::int64_t kBucketBytes = std::int64_t{25} << 20;
constexpr std::int64_t kFirstBucketBytes = std::int64_t{1} << 20;

// across_shards of every gradient, in buckets taken from the last leaf backwards (the last
// layer's gradients are final first); jit's schedule then starts each bucket's reduction as
// soon as its gradients exist and waits for it before the next one starts, each leaf's update
// following its bucket.
Tree gradients_across_shards(const Tree& grads, const Array* weight) {
  if (weight == nullptr) return grads;
  std::vector<Array> leaves = grads.leaves();
  for (Array& g : leaves)
    g = weighted(g, *weight);
  std::vector<Array> reduced(leaves.size());
  std::size_t end = leaves.size();
  while (end > 0) {
    const std::int64_t cap = end == leaves.size() ? kFirstBucketBytes : kBucketBytes;
    std::size_t begin = end - 1;
    std::int64_t bytes = leaves[begin].nbytes();
    while (begin > 0 && bytes + leaves[begin - 1].nbytes() <= cap)
      bytes += leaves[--begin].nbytes();
    const std::vector<Array> bucket = dist::all_reduce(
        std::span<const Array>(leaves).subspan(begin, end - begin), dist::ReduceOp::sum);
    std::copy(bucket.begin(), bucket.end(), reduced.begin() + static_cast<std::ptrdiff_t>(begin));
    end = begin;
  }
  return grads.with_leaves(reduced);
}

// `t` with every leaf that someone else also holds replaced by a copy on its device, so that
// donating the tree's buffers invalidates nothing of theirs.
Tree own_leaves(Tree t) {
  std::vector<Array> leaves = t.leaves();
  const Tree structure = t.with_leaves(std::vector<Array>(leaves.size()));
  t = Tree();  // `leaves` now holds the tree's references alone
  for (Array& a : leaves)
    if (!a.buffer_unshared()) a = a.copy();
  return structure.with_leaves(leaves);
}

bool any_donated(const Tree& t) {
  for (const Array& a : t.leaves())
    if (a.donated()) return true;
  return false;
}

}  // namespace

ClassifierStep::ClassifierStep(ApplyFn apply, optim::GradientTransformation tx)
    : ClassifierStep(
          [apply = std::move(apply)](const Tree& params, const Tree& batch_stats, const Array& x,
                                     const ApplyMode& /*mode*/) {
            return std::pair<Array, Tree>{apply(params, x), batch_stats};
          },
          std::move(tx)) {}

ClassifierStep::ClassifierStep(StatefulApplyFn apply, optim::GradientTransformation tx)
    : apply_(std::move(apply)), tx_(std::move(tx)), step_(make_step()) {}

Jitted ClassifierStep::make_step() const {
  const bool data_parallel = comm_ != nullptr && comm_->size() > 1;
  const random::ThreefryMode key_mode =
      dropout_key_ ? dropout_key_->mode() : random::ThreefryMode::partitionable;
  return jit(
      [apply = apply_, tx = tx_, data_parallel, key_mode](std::span<const Tree> a) {
        const Array& x = a[3].array();
        const Array& y = a[4].array();
        ApplyMode mode{.train = true};
        if (a[5].is_leaf())  // the step's dropout key, traced
          mode.rngs.emplace("dropout", random::Key::from_data(a[5].array(), key_mode));
        const Array* weight = data_parallel ? &a[6].array() : nullptr;
        // The updated batch statistics leave value_and_grad as its aux (has_aux).
        const Tree args[] = {a[0]};
        const int argnums[] = {0};
        ValueAuxAndGrad r = value_and_grad_with_aux(
            [&](std::span<const Tree> p) {
              auto [logits, stats] = apply(p[0], a[2], x, mode);
              return std::pair<Array, Tree>{
                  mean(optim::softmax_cross_entropy_with_integer_labels(logits, y)),
                  std::move(stats)};
            },
            args, argnums);
        Tree grads = gradients_across_shards(r.grads[0], weight);
        auto [params, opt_state] = optim::apply_gradients(tx, std::move(grads), a[1], a[0]);
        return std::vector<Tree>{std::move(params), std::move(opt_state), std::move(r.aux),
                                 Tree(across_shards(r.value, weight))};
      },
      {.donate_argnums = {0, 1}, .memory_budget = memory_budget_});
}

void ClassifierStep::set_memory_budget(std::int64_t bytes) {
  if (bytes < 0)
    throw ValueError(
        detail::str("ClassifierStep::set_memory_budget: expected a number of bytes "
                    "(0: no budget), got ",
                    bytes));
  memory_budget_ = bytes;
  step_ = make_step();
}

void ClassifierStep::set_communicator(dist::Communicator* comm) {
  if (comm != nullptr && comm != &dist::world())
    throw ValueError(
        "ClassifierStep::set_communicator: the step reduces gradients with the all_reduce "
        "primitive, over dist::world(); pass that communicator (or nullptr for one process)");
  comm_ = comm;
  step_ = make_step();  // traced anew: the reduction is part of the step
}

void ClassifierStep::set_dropout_key(const random::Key& key) {
  if (key.is_traced())
    throw ValueError(
        "ClassifierStep::set_dropout_key: the key must be concrete (the step folds each step's "
        "number into it before tracing); pass random::key(seed) or a key derived from it");
  dropout_key_ = key;
  step_ = make_step();  // traced anew: the key's mode is part of the step
}

std::vector<Tree> ClassifierStep::arguments(const TrainState& state, const Array& x,
                                            const Array& y) const {
  // Data sets live in host memory: the batch goes where the parameters are, once.
  const std::vector<Array> leaves = state.params.leaves();
  const Device device = leaves.empty() ? x.device() : leaves.front().device();
  std::vector<Tree> args{state.params,       state.opt_state,    state.batch_stats,
                         Tree(x.to(device)), Tree(y.to(device)), Tree()};
  if (dropout_key_) {
    random::Key key = random::fold_in(*dropout_key_, static_cast<std::uint32_t>(state.step));
    if (comm_ != nullptr && comm_->size() > 1)
      key = random::fold_in(key, static_cast<std::uint32_t>(comm_->rank()));
    args[5] = Tree(key.data().to(device));
  }
  if (comm_ != nullptr && comm_->size() > 1)
    args.emplace_back(Array::full(Shape{}, shard_weight(comm_, x.shape()[0]), DType::f32, device));
  return args;
}

CompiledStep ClassifierStep::lower(const TrainState& state, const Array& x, const Array& y) const {
  return step_.lower(arguments(state, x, y));
}

float ClassifierStep::operator()(TrainState& state, const Array& x, const Array& y) {
  // Copies of the state's leaves that the caller keeps stay theirs; the step takes the rest.
  TrainState mine{own_leaves(std::move(state.params)), own_leaves(std::move(state.opt_state)),
                  state.step, state.batch_stats};
  state.params = Tree();
  state.opt_state = Tree();
  std::vector<Tree> out;
  try {
    std::vector<Tree> args = arguments(mine, x, y);
    out = step_(std::move(args));
  } catch (...) {
    // A step that never took the buffers (a wrong shape, a refused argument) loses nothing.
    if (!any_donated(mine.params) && !any_donated(mine.opt_state)) {
      state.params = std::move(mine.params);
      state.opt_state = std::move(mine.opt_state);
    }
    throw;
  }
  state.params = std::move(out[0]);
  state.opt_state = std::move(out[1]);
  state.batch_stats = std::move(out[2]);
  ++state.step;
  return host_float(out[3].array());
}

std::pair<float, float> ClassifierStep::evaluate(const Tree& params, const Array& x, const Array& y,
                                                 std::int64_t batch_rows) const {
  return evaluate(TrainState{params, Tree(), 0, Tree()}, x, y, batch_rows);
}

std::pair<float, float> ClassifierStep::evaluate(const Tree& params, std::int64_t rows,
                                                 std::int64_t batch_rows,
                                                 const BatchFn& batch) const {
  return evaluate(TrainState{params, Tree(), 0, Tree()}, rows, batch_rows, batch);
}

std::pair<float, float> ClassifierStep::evaluate(const TrainState& state, const Array& x,
                                                 const Array& y, std::int64_t batch_rows) const {
  const std::int64_t n = x.shape()[0];
  if (batch_rows <= 0 || batch_rows >= n) {
    const double w = shard_weight(comm_, n);
    const Array logits = apply_(state.params, state.batch_stats, x, ApplyMode{}).first;
    return {host_float(global_mean(
                comm_, mean(optim::softmax_cross_entropy_with_integer_labels(logits, y)), w)),
            host_float(global_mean(comm_, optim::accuracy(logits, y), w))};
  }
  return evaluate(state, n, batch_rows, [&](std::int64_t begin, std::int64_t end) {
    std::vector<std::int32_t> rows(static_cast<std::size_t>(end - begin));
    for (std::int64_t r = begin; r < end; ++r)
      rows[static_cast<std::size_t>(r - begin)] = static_cast<std::int32_t>(r);
    const Array index = Array::from_vector(rows, Shape{end - begin}, x.device());
    return std::pair{lax::take(x, index), lax::take(y, index)};
  });
}

std::pair<float, float> ClassifierStep::evaluate(const TrainState& state, std::int64_t rows,
                                                 std::int64_t batch_rows,
                                                 const BatchFn& batch) const {
  if (batch_rows < 1)
    throw ValueError(
        detail::str("ClassifierStep::evaluate: batch_rows must be >= 1, got ", batch_rows));
  const double w = shard_weight(comm_, rows);
  // Batch by batch, so that only one batch's activations exist at a time: the means of the
  // batches weighted by their rows, summed in double.
  double loss = 0, accuracy = 0;
  Device device = default_device();
  for (std::int64_t begin = 0; begin < rows; begin += std::min(batch_rows, rows - begin)) {
    const std::int64_t end = begin + std::min(batch_rows, rows - begin);
    const auto [bx, by] = batch(begin, end);
    device = bx.device();
    const Array logits = apply_(state.params, state.batch_stats, bx, ApplyMode{}).first;
    const double share = static_cast<double>(end - begin) / static_cast<double>(rows);
    loss += share * host_float(mean(optim::softmax_cross_entropy_with_integer_labels(logits, by)));
    accuracy += share * host_float(optim::accuracy(logits, by));
  }
  const auto scalar = [&](double v) { return Array::full(Shape{}, v, DType::f32, device); };
  return {host_float(global_mean(comm_, scalar(loss), w)),
          host_float(global_mean(comm_, scalar(accuracy), w))};
}

}  // namespace flaxpp::train
