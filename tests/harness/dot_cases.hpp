// dot_general layouts every backend's products are checked over: each stored layout of the
// operands (plain, transposed, permuted), batch axes leading or not, several contracting axes,
// vectors, and attention's two products.
#pragma once

#include <vector>

#include "flaxpp/core/shape.hpp"
#include "flaxpp/ir/params.hpp"

namespace flaxpp::testing {

struct DotCase {
  const char* name;
  Shape lhs, rhs;
  ir::DotDimensionNumbers dn;
};

inline std::vector<DotCase> dot_cases() {
  return {
      {"matmul", Shape{3, 5}, Shape{5, 4}, {{1}, {0}, {}, {}}},
      {"lhs stored transposed", Shape{5, 3}, Shape{5, 4}, {{0}, {0}, {}, {}}},
      {"rhs stored transposed (x @ w.T)", Shape{3, 5}, Shape{4, 5}, {{1}, {1}, {}, {}}},
      {"both transposed", Shape{5, 3}, Shape{4, 5}, {{0}, {1}, {}, {}}},
      {"vector times matrix", Shape{5}, Shape{5, 4}, {{0}, {0}, {}, {}}},
      {"matrix times vector", Shape{3, 5}, Shape{5}, {{1}, {0}, {}, {}}},
      {"outer product (no contraction)", Shape{3}, Shape{4}, {{}, {}, {}, {}}},
      {"batched", Shape{2, 3, 5}, Shape{2, 5, 4}, {{2}, {1}, {0}, {0}}},
      {"batched, transposed operands", Shape{2, 5, 3}, Shape{2, 4, 5}, {{1}, {2}, {0}, {0}}},
      {"batch axis not leading (permuted)", Shape{3, 2, 5}, Shape{5, 2, 4}, {{2}, {0}, {1}, {1}}},
      {"two contracting axes", Shape{3, 2, 5}, Shape{2, 5, 4}, {{1, 2}, {0, 1}, {}, {}}},
      {"attention scores (b, h, q, d) x (b, h, k, d)", Shape{2, 3, 4, 6}, Shape{2, 3, 5, 6},
       {{3}, {3}, {0, 1}, {0, 1}}},
      {"attention values (b, h, q, k) x (b, k, h, d)", Shape{2, 3, 4, 5}, Shape{2, 5, 3, 6},
       {{3}, {1}, {0, 1}, {0, 2}}},
      {"one row", Shape{1, 5}, Shape{5, 1}, {{1}, {0}, {}, {}}},
  };
}

}  // namespace flaxpp::testing
