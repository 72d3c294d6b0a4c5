// optax losses, as optax 0.2.8 computes them; accuracy on the host.
#include "flaxpp/optim/losses.hpp"

#include <algorithm>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/ops/numpy.hpp"

namespace flaxpp::optim {

Array softmax_cross_entropy_with_integer_labels(const Array& logits, const Array& labels) {
  std::vector<std::int64_t> want = logits.shape().dims();
  if (!want.empty()) want.pop_back();
  if (logits.rank() == 0 || labels.shape().dims() != want)
    throw ValueError(detail::str(
        "softmax_cross_entropy_with_integer_labels: labels ", labels.aval(),
        " do not match logits ", logits.aval(), "; expected one class id per row of the logits, ",
        "labels of shape ", Shape(want), " (the logits' shape without the class axis)"));
  const Axes last{logits.rank() - 1};
  const Array shifted = logits - lax::stop_gradient(max(logits, last, true));
  // take_along_axis(shifted, labels) as a one-hot sum: one non-zero term, the same value and
  // gradient.
  const Array label_logits =
      sum(shifted * one_hot(labels, logits.shape()[-1], logits.dtype()), last);
  return log(sum(exp(shifted), last)) - label_logits;
}

Array softmax_cross_entropy(const Array& logits, const Array& labels) {
  return -sum(labels * log_softmax(logits, -1), Axes{logits.rank() - 1});
}

Array sigmoid_binary_cross_entropy(const Array& logits, const Array& labels) {
  // log_sigmoid(x) = -softplus(-x), computed stably as -(log1p(exp(-|x|)) + max(-x, 0)).
  auto log_sigmoid = [](const Array& x) {
    return -(log1p(exp(-abs(x))) + maximum(-x, lax::scalar(0.0, x.dtype())));
  };
  return -labels * log_sigmoid(logits) - (1.0 - labels) * log_sigmoid(-logits);
}

Array l2_loss(const Array& predictions, const Array& targets) {
  const Array errors = targets.valid() ? predictions - targets : predictions;
  return 0.5 * square(errors);
}

Array accuracy(const Array& logits, const Array& labels) {
  const std::vector<float> l = astype(logits, DType::f32).to_vector<float>();
  const std::vector<std::int32_t> y = labels.to_vector<std::int32_t>();
  const auto classes = static_cast<std::size_t>(logits.shape()[-1]);
  if (y.size() * classes != l.size())
    throw ValueError(detail::str("accuracy: logits ", logits.aval(), " and labels ", labels.aval(),
                                 " do not match"));
  std::size_t correct = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const auto row = l.begin() + static_cast<std::ptrdiff_t>(i * classes);
    correct +=
        static_cast<std::size_t>(std::max_element(row, row + static_cast<std::ptrdiff_t>(classes)) -
                                 row) == static_cast<std::size_t>(y[i]);
  }
  return Array::scalar(y.empty() ? 0.0f
                                 : static_cast<float>(correct) / static_cast<float>(y.size()));
}

}  // namespace flaxpp::optim
