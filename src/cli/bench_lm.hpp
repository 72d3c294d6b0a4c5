// `flaxpp bench --model lm`: the language model's training step (examples/lm.json's model:
// nn::LanguageModel, vocabulary 64, width 64, 4 layers of 4 heads, MLP 256, 64 tokens, batch
// 32, SGD) under each remat policy of its Blocks; one JSON line per policy with the median step
// time, tokens/s and the peak bytes. python_compat/lm_speed.py times JAX's step beside it.
// `attention` is the Blocks' (a train config's model.attention: flax, fused or xla).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace flaxpp::cli {

int bench_lm(std::int64_t steps, const std::string& attention, std::ostream& out);

}  // namespace flaxpp::cli
