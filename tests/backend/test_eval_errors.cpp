// The errors of lax evaluation: the shape rules refusing mismatched dtypes and shapes, a dtype
// the backend does not implement, and a primitive the CPU backend does not know; each a
// ValueError naming what is wrong. ctest runs the suite on the CPU and again with
// FLAXPP_DEVICE=cuda.
#include <doctest/doctest.h>

#include "harness/eval_cases.hpp"

#include <span>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/primitive.hpp"
#include "src/backend/cpu/cpu_eval.hpp"

using namespace flaxpp;
using namespace flaxpp::testing;

TEST_CASE("eval: shape rules reject mismatched dtypes and shapes with ValueError") {
  const Array x = make(DType::f32, {2}, {1, 2});
  const Array xd = make(DType::f64, {2}, {1, 2});
  const Array x3 = make(DType::f32, {3}, {1, 2, 3});
  const Array m = make(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK_THROWS_AS(lax::add(x, xd), ValueError);
  CHECK_THROWS_AS(lax::add(x, x3), ValueError);
  CHECK_THROWS_AS(lax::lt(x, xd), ValueError);
  CHECK_THROWS_AS(lax::dot_general(m, m, dims({1}, {0})), ValueError);
  CHECK_THROWS_AS(lax::dot_general(m, make(DType::f64, {3}, {1, 2, 3}), dims({1}, {0})),
                  ValueError);
  CHECK_THROWS_AS(lax::select_n(make(DType::bool_, {2}, {1, 0}), std::vector<Array>{x, xd}),
                  ValueError);
  CHECK_THROWS_AS(lax::exp(make(DType::i32, {1}, {1})), ValueError);
  CHECK_THROWS_AS(lax::reshape(x3, {2, 2}), ValueError);
  CHECK_THROWS_AS(lax::broadcast_in_dim(x3, {2, 2}, {1}), ValueError);
}

TEST_CASE("eval: a dtype the backend does not implement is a ValueError naming both") {
  const Array p = make(DType::bool_, {2}, {1, 0});
  const Array mi = make(DType::i32, {2, 2}, {1, 2, 3, 4});
  const Array m = make(DType::f32, {2, 2}, {1, 2, 3, 4});
  CHECK_THROWS_WITH_AS(lax::add(p, p), doctest::Contains("add"), ValueError);
  CHECK_THROWS_WITH_AS(lax::add(p, p), doctest::Contains("bool"), ValueError);
  // Integer dots are refused by dot_general's shape rule already, while tracing.
  CHECK_THROWS_WITH_AS(lax::dot_general(mi, mi, dims({1}, {0})),
                       doctest::Contains("operands must be floating point"), ValueError);
  if (default_device() == Device::cpu()) {  // the CPU stores bf16 but computes nothing in it
    const Array h = lax::convert_element_type(m, DType::bf16);
    CHECK_THROWS_WITH_AS(lax::add(h, h), doctest::Contains("bfloat16"), ValueError);
  }
  CHECK_THROWS_WITH_AS(lax::dot_general(m, m, dims({1}, {0}), DType::f64),
                       doctest::Contains("preferred_element_type"), ValueError);
}

TEST_CASE("eval: a primitive the CPU backend does not know is a ValueError naming it") {
  const ir::Primitive made_up("made_up", [](std::span<const AVal> in, const ir::Params&) {
    return std::vector<AVal>(in.begin(), in.end());
  });
  const Array x = make(DType::f32, {1}, {1});
  const Array in[] = {x};
  const AVal out[] = {x.aval()};
  CHECK_THROWS_WITH_AS(cpu::eval(made_up, in, {}, out), doctest::Contains("made_up"), ValueError);
  CHECK_THROWS_WITH_AS(ir::eval_primitive(made_up, in, {}), doctest::Contains("made_up"),
                       ValueError);
}
