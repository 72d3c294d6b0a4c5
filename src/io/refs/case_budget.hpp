// src/io/refs/case_budget.hpp — what a reference case may take: estimates of its host memory
// that refuse, naming the input, a case whose sizes need more than is available (instead of
// starting and being killed, or caps that would reject a valid case), and the validated MLP
// sizes the problem families share. The time a case may take is CaseContext::deadline.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "flaxpp/io/refs.hpp"

namespace flaxpp::refs {

// Throws InputError "<input>: <what> needs 8.00 GB of host memory, but ..." when `bytes`
// exceed the host memory available.
void check_case_memory(double bytes, const std::string& input, const std::string& what);

// inputs.<key>: an integer >= 1.
std::int64_t positive_integer(const Inputs& in, std::string_view key);

// inputs.features: a non-empty list of layer sizes >= 1.
std::vector<std::int64_t> mlp_features(const Inputs& in);

// Checks that an MLP of these layer sizes on `rows` inputs of `in_features` fits in memory:
// `param_copies` copies of its parameters (init makes about 3; gradients and an optimiser's
// state add theirs) and a few of each layer's activations.
void check_mlp_memory(const Inputs& in, std::int64_t in_features,
                      std::span<const std::int64_t> features, std::int64_t rows,
                      double param_copies);
// The same for an MLP applied to x: its last axis the features, the others rows.
void check_mlp_memory(const Inputs& in, const Array& x, std::span<const std::int64_t> features,
                      double param_copies);

// Parameter copies alive at once: init makes about three (bits, uniform, scaled), gradients
// add two, a training step with an optimiser's state (adam: mu and nu) three more.
inline constexpr double kInitCopies = 3, kGradCopies = 5, kTrainCopies = 8;

}  // namespace flaxpp::refs
