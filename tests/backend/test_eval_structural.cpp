// Evaluation of the reductions and structural lax primitives on the default device:
// reduce_sum and reduce_max over any axes, broadcast_in_dim, reshape, transpose, and
// stop_gradient and checkpoint_name (which return their input's buffer).
// ctest runs the suite on the CPU and again with FLAXPP_DEVICE=cuda, so both backends meet
// the same cases; the tables and their runner are in harness/eval_cases.hpp.
#include <doctest/doctest.h>

#include "harness/eval_cases.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/lax.hpp"

using namespace flaxpp;
using namespace flaxpp::testing;

TEST_CASE("eval: reduce_sum and reduce_max over no, one, several and all axes") {
  std::vector<Case> cases;
  for (const DType dt : {DType::f32, DType::f64, DType::i32, DType::u32}) {
    const Array x = iota(dt, {2, 3, 4});  // x[a, j, k] = 12a + 4j + k
    std::vector<double> all(24);
    for (std::size_t i = 0; i < 24; ++i)
      all[i] = static_cast<double>(i);
    cases.push_back(
        {name("sum over ()", dt), [=] { return lax::reduce_sum(x, {}); }, {{2, 3, 4}, dt}, all});
    cases.push_back({name("sum over (0)", dt),
                     [=] { return lax::reduce_sum(x, {0}); },
                     {{3, 4}, dt},
                     {12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34}});
    cases.push_back({name("sum over (1)", dt),
                     [=] { return lax::reduce_sum(x, {1}); },
                     {{2, 4}, dt},
                     {12, 15, 18, 21, 48, 51, 54, 57}});
    cases.push_back({name("sum over (2)", dt),
                     [=] { return lax::reduce_sum(x, {2}); },
                     {{2, 3}, dt},
                     {6, 22, 38, 54, 70, 86}});
    cases.push_back({name("sum over (0, 2)", dt),
                     [=] {
                       return lax::reduce_sum(x, {0, 2});
                     },
                     {{3}, dt},
                     {60, 92, 124}});
    cases.push_back({name("sum over (1, 2)", dt),
                     [=] {
                       return lax::reduce_sum(x, {1, 2});
                     },
                     {{2}, dt},
                     {66, 210}});
    cases.push_back({name("sum over all", dt),
                     [=] {
                       return lax::reduce_sum(x, {0, 1, 2});
                     },
                     {{}, dt},
                     {276}});
    cases.push_back(
        {name("max over ()", dt), [=] { return lax::reduce_max(x, {}); }, {{2, 3, 4}, dt}, all});
    cases.push_back({name("max over (1)", dt),
                     [=] { return lax::reduce_max(x, {1}); },
                     {{2, 4}, dt},
                     {8, 9, 10, 11, 20, 21, 22, 23}});
    cases.push_back({name("max over (0, 2)", dt),
                     [=] {
                       return lax::reduce_max(x, {0, 2});
                     },
                     {{3}, dt},
                     {15, 19, 23}});
    cases.push_back({name("max over all", dt),
                     [=] {
                       return lax::reduce_max(x, {0, 1, 2});
                     },
                     {{}, dt},
                     {23}});

    const Array ones_dim = make(dt, {2, 1, 3}, {1, 2, 3, 4, 5, 6});
    cases.push_back({name("sum over a size-1 axis", dt),
                     [=] { return lax::reduce_sum(ones_dim, {1}); },
                     {{2, 3}, dt},
                     {1, 2, 3, 4, 5, 6}});
    cases.push_back({name("sum over (0, 1) with a size-1 axis", dt),
                     [=] {
                       return lax::reduce_sum(ones_dim, {0, 1});
                     },
                     {{3}, dt},
                     {5, 7, 9}});

    // Rows of 20 elements: the 8-lane accumulation plus a tail.
    const Array rows = iota(dt, {2, 20});
    cases.push_back({name("sum of 20-element rows", dt),
                     [=] { return lax::reduce_sum(rows, {1}); },
                     {{2}, dt},
                     {190, 590}});
    std::vector<double> spike(20, 1);
    spike[5] = 100;
    const Array peaked = make(dt, {20}, spike);
    cases.push_back({name("max of a 20-element row", dt),
                     [=] { return lax::reduce_max(peaked, {0}); },
                     {{}, dt},
                     {100}});

    const Array empty = make(dt, {2, 0}, {});
    const double lowest = dt == DType::i32 ? kI32Min : dt == DType::u32 ? 0 : -kInf;
    cases.push_back({name("max over an empty axis is the identity", dt),
                     [=] { return lax::reduce_max(empty, {1}); },
                     {{2}, dt},
                     {lowest, lowest}});
    cases.push_back({name("sum over an empty axis is 0", dt),
                     [=] { return lax::reduce_sum(empty, {1}); },
                     {{2}, dt},
                     {0, 0}});
    cases.push_back({name("sum keeping an empty axis is empty", dt),
                     [=] { return lax::reduce_sum(empty, {0}); },
                     {{0}, dt},
                     {}});
  }
  for (const DType dt : kFloats) {
    const Array x = make(dt, {3}, {1, kNaN, 3});
    cases.push_back({name("max propagates NaN", dt),
                     [=] { return lax::reduce_max(x, {0}); },
                     {{}, dt},
                     {kNaN}});
    cases.push_back({name("sum propagates NaN", dt),
                     [=] { return lax::reduce_sum(x, {0}); },
                     {{}, dt},
                     {kNaN}});
  }
  run_cases(cases);
}

TEST_CASE("eval: broadcast_in_dim repeats new axes and size-1 axes") {
  std::vector<Case> cases;
  for (const DType dt : {DType::f32, DType::f64, DType::i32, DType::u32}) {
    const AVal out{{2, 3}, dt};
    const Array s = make(dt, {}, {7});
    const Array row = make(dt, {3}, {1, 2, 3});
    const Array col = make(dt, {2}, {1, 2});
    const Array row1 = make(dt, {1, 3}, {1, 2, 3});
    const Array col1 = make(dt, {2, 1}, {1, 2});
    const Array full = make(dt, {2, 3}, {1, 2, 3, 4, 5, 6});
    cases.push_back({name("0-d to (2, 3)", dt),
                     [=] {
                       return lax::broadcast_in_dim(s, {2, 3}, {});
                     },
                     out,
                     {7, 7, 7, 7, 7, 7}});
    cases.push_back({name("(3) to (2, 3) along axis 1", dt),
                     [=] {
                       return lax::broadcast_in_dim(row, {2, 3}, {1});
                     },
                     out,
                     {1, 2, 3, 1, 2, 3}});
    cases.push_back({name("(2) to (2, 3) along axis 0", dt),
                     [=] {
                       return lax::broadcast_in_dim(col, {2, 3}, {0});
                     },
                     out,
                     {1, 1, 1, 2, 2, 2}});
    cases.push_back({name("(1, 3) to (2, 3) expands the size-1 axis", dt),
                     [=] {
                       return lax::broadcast_in_dim(row1, {2, 3}, {0, 1});
                     },
                     out,
                     {1, 2, 3, 1, 2, 3}});
    cases.push_back({name("(2, 1) to (2, 3, 2): a new middle axis and a size-1 axis", dt),
                     [=] {
                       return lax::broadcast_in_dim(col1, {2, 3, 2}, {0, 2});
                     },
                     {{2, 3, 2}, dt},
                     {1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2}});
    cases.push_back({name("(2, 3) to (2, 3) copies", dt),
                     [=] {
                       return lax::broadcast_in_dim(full, {2, 3}, {0, 1});
                     },
                     out,
                     {1, 2, 3, 4, 5, 6}});
    cases.push_back({name("(2, 3) to (2, 2, 3) along axes (1, 2)", dt),
                     [=] {
                       return lax::broadcast_in_dim(full, {2, 2, 3}, {1, 2});
                     },
                     {{2, 2, 3}, dt},
                     {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}});
    cases.push_back({name("(1) to (0, 2): nothing to write", dt),
                     [=] {
                       return lax::broadcast_in_dim(make(dt, {1}, {5}), {0, 2}, {1});
                     },
                     {{0, 2}, dt},
                     {}});
  }
  const Array b = make(DType::bool_, {2}, {1, 0});
  cases.push_back({"bool (2) to (2, 3)",
                   [=] {
                     return lax::broadcast_in_dim(b, {2, 3}, {0});
                   },
                   {{2, 3}, DType::bool_},
                   {1, 1, 1, 0, 0, 0}});
  run_cases(cases);
}

TEST_CASE("eval: reshape keeps row-major order") {
  std::vector<Case> cases;
  for (const DType dt : {DType::f32, DType::f64, DType::i32, DType::u32}) {
    const Array x = iota(dt, {2, 3});
    cases.push_back({name("(2, 3) to (3, 2)", dt),
                     [=] {
                       return lax::reshape(x, {3, 2});
                     },
                     {{3, 2}, dt},
                     {0, 1, 2, 3, 4, 5}});
    cases.push_back({name("(2, 3) to (1, 6, 1)", dt),
                     [=] {
                       return lax::reshape(x, {1, 6, 1});
                     },
                     {{1, 6, 1}, dt},
                     {0, 1, 2, 3, 4, 5}});
    cases.push_back({name("(1) to ()", dt),
                     [=] { return lax::reshape(make(dt, {1}, {4}), {}); },
                     {{}, dt},
                     {4}});
  }
  const Array b = make(DType::bool_, {4}, {1, 0, 0, 1});
  cases.push_back({"bool (4) to (2, 2)",
                   [=] {
                     return lax::reshape(b, {2, 2});
                   },
                   {{2, 2}, DType::bool_},
                   {1, 0, 0, 1}});
  run_cases(cases);
}

TEST_CASE("eval: transpose applies any permutation, 2-D tiles included") {
  std::vector<Case> cases;
  for (const DType dt : {DType::f32, DType::f64, DType::i32, DType::u32}) {
    cases.push_back({name("(2, 3) by (1, 0)", dt),
                     [=] {
                       return lax::transpose(iota(dt, {2, 3}), {1, 0});
                     },
                     {{3, 2}, dt},
                     {0, 3, 1, 4, 2, 5}});
    // x[a, j, k] = 12a + 4j + k; result axis i walks operand axis perm[i].
    const Array x = iota(dt, {2, 3, 4});
    const std::vector<std::vector<std::int64_t>> perms = {{2, 0, 1}, {1, 0, 2}, {0, 2, 1},
                                                          {2, 1, 0}, {1, 2, 0}, {0, 1, 2}};
    for (const auto& perm : perms) {
      const std::int64_t in_dims[] = {2, 3, 4};
      const std::int64_t in_strides[] = {12, 4, 1};
      const std::vector<std::int64_t> out_dims = {in_dims[perm[0]], in_dims[perm[1]],
                                                  in_dims[perm[2]]};
      std::vector<double> want;
      for (std::int64_t i0 = 0; i0 < out_dims[0]; ++i0)
        for (std::int64_t i1 = 0; i1 < out_dims[1]; ++i1)
          for (std::int64_t i2 = 0; i2 < out_dims[2]; ++i2)
            want.push_back(static_cast<double>(i0 * in_strides[perm[0]] + i1 * in_strides[perm[1]] +
                                               i2 * in_strides[perm[2]]));
      cases.push_back(
          {detail::str(name("(2, 3, 4) by", dt), " (", perm[0], ", ", perm[1], ", ", perm[2], ")"),
           [=] { return lax::transpose(x, perm); },
           {Shape(out_dims), dt},
           want});
    }
    // (37, 70): several 32x32 tiles with ragged edges.
    const Array m = iota(dt, {37, 70});
    std::vector<double> want;
    for (std::int64_t c = 0; c < 70; ++c)
      for (std::int64_t r = 0; r < 37; ++r)
        want.push_back(static_cast<double>(r * 70 + c));
    cases.push_back({name("(37, 70) by (1, 0)", dt),
                     [=] {
                       return lax::transpose(m, {1, 0});
                     },
                     {{70, 37}, dt},
                     want});
  }
  const Array b = make(DType::bool_, {2, 2}, {1, 1, 0, 0});
  cases.push_back({"bool (2, 2) by (1, 0)",
                   [=] {
                     return lax::transpose(b, {1, 0});
                   },
                   {{2, 2}, DType::bool_},
                   {1, 0, 1, 0}});
  run_cases(cases);
}

TEST_CASE("eval: stop_gradient and checkpoint_name return their input's buffer") {
  const Array x = make(DType::f32, {3}, {1, 2, 3});
  const Array s = lax::stop_gradient(x);
  const Array n = lax::checkpoint_name(x, "h");
  CHECK(&s.buffer() == &x.buffer());
  CHECK(&n.buffer() == &x.buffer());
  CHECK(n.to_vector<float>() == std::vector<float>{1, 2, 3});
}
