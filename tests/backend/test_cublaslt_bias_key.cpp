// When the CUDA backend asks cuBLASLt's bias epilogue for a product, checked on the CPU (the
// rule is plain C++): one matrix, every dimension above 1, a 16-byte aligned bias; the
// alignments its heuristic is told of the operands; and the key its plans are cached by.
#include <doctest/doctest.h>

#include <cstdint>
#include <unordered_set>
#include <vector>

#include "src/backend/cuda/cublaslt_bias_key.hpp"

using namespace flaxpp::cuda;

TEST_CASE("cuBLASLt bias epilogue: asked only for single products with every dimension above 1") {
  CHECK(bias_epilogue_applies(64, 32, 20, 1, 256));
  CHECK(bias_epilogue_applies(2, 2, 2, 1, 16));
  // Dense(features=1) on a batch: the column-major d has one row, which cuBLASLt's heuristic
  // may answer with INVALID_VALUE; a batch of one row, or a product over one element, alike.
  CHECK_FALSE(bias_epilogue_applies(1, 32, 20, 1, 256));
  CHECK_FALSE(bias_epilogue_applies(64, 1, 20, 1, 256));
  CHECK_FALSE(bias_epilogue_applies(64, 32, 1, 1, 256));
  CHECK_FALSE(bias_epilogue_applies(64, 32, 20, 2, 256));  // batched: one bias per matrix
  CHECK_FALSE(bias_epilogue_applies(64, 32, 20, 1, 8));    // the epilogue needs 16 bytes
}

TEST_CASE("cuBLASLt bias epilogue: a pointer's alignment is its largest power-of-two divisor up "
          "to 256") {
  CHECK(pointer_alignment(0) == 256);
  CHECK(pointer_alignment(4096) == 256);
  CHECK(pointer_alignment(256 + 128) == 128);
  CHECK(pointer_alignment(256 + 16) == 16);
  CHECK(pointer_alignment(256 + 4) == 4);
  CHECK(pointer_alignment(257) == 1);
}

TEST_CASE("cuBLASLt bias plans: the key tells apart every product a plan cannot be reused for") {
  const LtBiasKey base{.m = 64,
                       .n = 32,
                       .k = 20,
                       .ld_first = 64,
                       .ld_second = 20,
                       .ld_out = 64,
                       .transpose_first = false,
                       .transpose_second = false,
                       .data_type = 0,
                       .compute_type = 68,
                       .align_first = 256,
                       .align_second = 256,
                       .align_out = 256};
  const LtBiasKeyHash hash;
  LtBiasKey same = base;
  CHECK(same == base);
  CHECK(hash(same) == hash(base));
  // Each of these changes what the descriptor, the layouts or the heuristic's choice is.
  std::vector<LtBiasKey> others(8, base);
  others[0].m = 65;
  others[1].k = 21;
  others[2].ld_first = 128;
  others[3].transpose_second = true;
  others[4].data_type = 1;
  others[5].compute_type = 77;  // TF32 instead of true float32
  others[6].align_first = 4;    // a view 4 bytes into a buffer
  others[7].align_out = 16;
  std::unordered_set<LtBiasKey, LtBiasKeyHash> keys{base};
  for (const LtBiasKey& k : others) {
    CHECK_FALSE(k == base);
    keys.insert(k);
  }
  CHECK(keys.size() == others.size() + 1);
  keys.insert(same);
  CHECK(keys.size() == others.size() + 1);
}
