// Private to the reference problems: the trajectory problems' training loop (train_mlp,
// lm_train, cnn_train) — batches of rows taken in order, cycling, each one step of a
// ClassifierStep — and their optimiser input.
#pragma once

#include <algorithm>
#include <span>
#include <utility>
#include <vector>

#include "flaxpp/io/optimizer_spec.hpp"
#include "flaxpp/io/refs.hpp"
#include "flaxpp/train/train_state.hpp"

namespace flaxpp::refs {

// Rows (start + j) mod N for j < bs of a (N, ...) array, as a new host array.
template <class T>
Array take_rows(const Array& a, std::int64_t start, std::int64_t bs) {
  const std::int64_t n = a.shape()[0], row = a.size() / std::max<std::int64_t>(n, 1);
  const std::span<const T> v = a.host_span<T>();
  std::vector<T> out;
  out.reserve(static_cast<std::size_t>(bs * row));
  for (std::int64_t j = 0; j < bs; ++j) {
    const std::int64_t r = (start + j) % n;
    out.insert(out.end(), v.begin() + r * row, v.begin() + (r + 1) * row);
  }
  std::vector<std::int64_t> dims = a.shape().dims();
  dims[0] = bs;
  return Array::from_vector(out, Shape(dims), Device::cpu());
}

// `state` trained by `step`, step i on rows (i * bs + j) mod N of `rows_of` (the batch made
// from those rows by `split(start)`): {"losses", "params"} and "batch_stats" when the state
// has any.
template <class Split>
Tree train_trajectory(train::ClassifierStep& step, train::TrainState state, const Array& rows_of,
                      std::int64_t steps, std::int64_t bs, const Split& split,
                      const CaseContext& cx) {
  std::vector<float> losses;
  const std::int64_t n = rows_of.shape()[0];
  // Step i starts at row (i * bs) mod n, kept below n so that nothing overflows.
  for (std::int64_t i = 0, start = 0; i < steps; ++i, start = (start + bs % n) % n) {
    cx.check_time();
    const auto [x, y] = split(start);
    losses.push_back(step(state, x, y));
  }
  Tree out{{"losses", Array::from_vector(losses, Shape{steps})}, {"params", state.params}};
  if (!state.batch_stats.leaves().empty()) out.set("batch_stats", state.batch_stats);
  return out;
}

// Input "optimizer": an optimiser spec.
inline optim::GradientTransformation optimizer_input(const Inputs& in) {
  try {
    return io::optimizer_from_spec(in.raw("optimizer"), in.path() + ".optimizer");
  } catch (const ParseError& e) {
    throw InputError(e.what());
  }
}

}  // namespace flaxpp::refs
