// When the CUDA backend asks cuBLASLt's bias epilogue for a product, checked on the CPU (the
// rule is plain C++): one matrix, every dimension above 1, a 16-byte aligned bias; and the
// alignments its heuristic is told of the operands.
#include <doctest/doctest.h>

#include <cstdint>

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
