// flaxpp/optim/losses.hpp — optax's losses and a classification metric, per example (reduce
// them with mean()).
#pragma once

#include "flaxpp/core/array.hpp"

namespace flaxpp::optim {

// -sum(labels * log_softmax(logits), axis=-1); labels are distributions over the last axis.
Array softmax_cross_entropy(const Array& logits, const Array& labels);
// log(sum(exp(logits))) - logits[label], with int32 labels of logits' leading shape.
Array softmax_cross_entropy_with_integer_labels(const Array& logits, const Array& labels);
// Elementwise binary cross-entropy of logits against 0/1 labels: log(1 + exp(x)) - x * y.
Array sigmoid_binary_cross_entropy(const Array& logits, const Array& labels);
// 0.5 * (predictions - targets)^2, elementwise.
Array l2_loss(const Array& predictions, const Array& targets = Array());
// Fraction of rows whose arg-max logit is the label (a float32 scalar).
Array accuracy(const Array& logits, const Array& labels);

}  // namespace flaxpp::optim
