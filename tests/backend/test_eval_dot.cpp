// Evaluation of the contractions on the default device: dot_general over any contracting and
// batch dimensions, and layer_norm and its cotangents against Flax's formula composed from
// primitives, in f32 and f64.
// ctest runs the suite on the CPU and again with FLAXPP_DEVICE=cuda, so both backends meet
// the same cases; the tables and their runner are in harness/eval_cases.hpp.
#include <doctest/doctest.h>

#include "harness/eval_cases.hpp"

#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/ir/lax.hpp"

using namespace flaxpp;
using namespace flaxpp::testing;

TEST_CASE("eval: dot_general contracts any dimensions, with batch dims anywhere") {
  std::vector<Case> cases;
  for (const DType dt : kFloats) {
    // A = [[1, 2, 3], [4, 5, 6]], B = [[7, 8], [9, 10], [11, 12]], A B = [[58, 64], [139, 154]].
    const Array a = make(dt, {2, 3}, {1, 2, 3, 4, 5, 6});
    const Array at = make(dt, {3, 2}, {1, 4, 2, 5, 3, 6});
    const Array bm = make(dt, {3, 2}, {7, 8, 9, 10, 11, 12});
    const Array bt = make(dt, {2, 3}, {7, 9, 11, 8, 10, 12});
    const AVal out{{2, 2}, dt};
    const std::vector<double> ab = {58, 64, 139, 154};
    cases.push_back({name("matmul (2, 3) x (3, 2)", dt),
                     [=] { return lax::dot_general(a, bm, dims({1}, {0})); }, out, ab});
    cases.push_back({name("contracting dim 0 of both", dt),
                     [=] { return lax::dot_general(at, bm, dims({0}, {0})); }, out, ab});
    cases.push_back({name("contracting dim 1 of both", dt),
                     [=] { return lax::dot_general(a, bt, dims({1}, {1})); }, out, ab});
    cases.push_back({name("contracting lhs dim 0, rhs dim 1", dt),
                     [=] { return lax::dot_general(at, bt, dims({0}, {1})); }, out, ab});
    cases.push_back({name("preferred_element_type equal to the inputs'", dt),
                     [=] { return lax::dot_general(a, bm, dims({1}, {0}), dt); }, out, ab});

    const Array v3 = make(dt, {3}, {1, 1, 2});
    const Array v2 = make(dt, {2}, {1, 2});
    cases.push_back({name("matrix-vector", dt),
                     [=] { return lax::dot_general(a, v3, dims({1}, {0})); },
                     {{2}, dt},
                     {9, 21}});
    cases.push_back({name("vector-matrix", dt),
                     [=] { return lax::dot_general(v2, a, dims({0}, {0})); },
                     {{3}, dt},
                     {9, 12, 15}});
    cases.push_back({name("vector-vector to 0-d", dt),
                     [=] {
                       return lax::dot_general(v3, make(dt, {3}, {4, 5, 6}), dims({0}, {0}));
                     },
                     {{}, dt},
                     {21}});
    cases.push_back({name("outer product (no contracting dims)", dt),
                     [=] {
                       return lax::dot_general(v2, make(dt, {3}, {3, 4, 5}), dims({}, {}));
                     },
                     {{2, 3}, dt},
                     {3, 4, 5, 6, 8, 10}});

    // Batch element b is ((b + 1) A) B.
    const std::vector<double> batched = {58, 64, 139, 154, 116, 128, 278, 308};
    const AVal bout{{2, 2, 2}, dt};
    const Array la = make(dt, {2, 2, 3}, {1, 2, 3, 4, 5, 6, 2, 4, 6, 8, 10, 12});       // (b, i, k)
    const Array rb = make(dt, {2, 3, 2}, {7, 8, 9, 10, 11, 12, 7, 8, 9, 10, 11, 12});   // (b, k, j)
    const Array rbt = make(dt, {2, 2, 3}, {7, 9, 11, 8, 10, 12, 7, 9, 11, 8, 10, 12});  // (b, j, k)
    const Array la_mid = make(dt, {2, 2, 3}, {1, 2, 3, 2, 4, 6, 4, 5, 6, 8, 10, 12});   // (i, b, k)
    const Array rb_last =
        make(dt, {3, 2, 2}, {7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12});  // (k, j, b)
    cases.push_back({name("batched matmul, batch dims first", dt),
                     [=] { return lax::dot_general(la, rb, dims({2}, {1}, {0}, {0})); }, bout,
                     batched});
    cases.push_back({name("batched matmul, rhs contracting its last dim", dt),
                     [=] { return lax::dot_general(la, rbt, dims({2}, {2}, {0}, {0})); }, bout,
                     batched});
    cases.push_back({name("batched matmul, batch dims in the middle and last", dt),
                     [=] { return lax::dot_general(la_mid, rb_last, dims({2}, {0}, {1}, {2})); },
                     bout, batched});

    // out[i] = sum_jk L[i, j, k] R[j, k] with L = iota (2, 3, 2), R = 1 + iota (3, 2).
    const Array l3 = iota(dt, {2, 3, 2});
    const Array r2 = make(dt, {3, 2}, {1, 2, 3, 4, 5, 6});
    cases.push_back({name("two contracting dims", dt),
                     [=] {
                       return lax::dot_general(l3, r2, dims({1, 2}, {0, 1}));
                     },
                     {{2}, dt},
                     {70, 196}});
    cases.push_back({name("two contracting dims listed in reverse", dt),
                     [=] {
                       return lax::dot_general(l3, r2, dims({2, 1}, {1, 0}));
                     },
                     {{2}, dt},
                     {70, 196}});

    cases.push_back(
        {name("contracting a size-0 dim gives zeros", dt),
         [=] {
           return lax::dot_general(make(dt, {2, 0}, {}), make(dt, {0, 3}, {}), dims({1}, {0}));
         },
         {{2, 3}, dt},
         {0, 0, 0, 0, 0, 0}});
    cases.push_back({name("a size-0 free dim gives an empty result", dt),
                     [=] {
                       return lax::dot_general(make(dt, {0, 3}, {}), bm, dims({1}, {0}));
                     },
                     {{0, 2}, dt},
                     {}});
    cases.push_back({name("a size-0 batch dim gives an empty result", dt),
                     [=] {
                       return lax::dot_general(make(dt, {0, 2, 3}, {}), make(dt, {0, 3, 2}, {}),
                                               dims({2}, {1}, {0}, {0}));
                     },
                     {{0, 2, 2}, dt},
                     {}});
  }
  run_cases(cases);
}

TEST_CASE("eval: layer_norm and its cotangents match Flax's formula composed from primitives") {
  for (const DType dt : kFloats) {
    INFO(dtype_name(dt));
    const Array x = make(dt, {2, 4}, {0.5, -1, 2, 3.5, -0.25, 0.75, 1, -2});
    const Array scale = make(dt, {4}, {1, 0.5, -2, 1.5});
    const Array bias = make(dt, {4}, {0.1, 0, -0.3, 2});
    const Array dy = make(dt, {2, 4}, {1, -1, 0.5, 2, -0.5, 0.25, 3, 1});
    const double eps = 1e-5;
    // The reference: mean, fast variance, rsqrt, as flax.linen.LayerNorm composes them.
    const auto n = lax::scalar(4, dt);
    const Array mean = lax::div(lax::reduce_sum(x, {1}), n);
    const Array mean2 = lax::div(lax::reduce_sum(lax::mul(x, x), {1}), n);
    const Array var = lax::sub(mean2, lax::mul(mean, mean));
    const Array r = lax::rsqrt(lax::add(var, lax::scalar(eps, dt)));
    auto rows = [](const Array& v) { return lax::broadcast_in_dim(v, Shape{2, 4}, {0}); };
    auto cols = [](const Array& v) { return lax::broadcast_in_dim(v, Shape{2, 4}, {1}); };
    const Array xhat = lax::mul(lax::sub(x, rows(mean)), rows(r));
    const Array y =
        lax::add(lax::mul(lax::sub(x, rows(mean)), lax::mul(rows(r), cols(scale))), cols(bias));
    const Array g = lax::mul(dy, cols(scale));
    const Array mean_g = lax::div(lax::reduce_sum(g, {1}), n);
    const Array mean_gx = lax::div(lax::reduce_sum(lax::mul(g, xhat), {1}), n);
    const Array dx =
        lax::mul(rows(r), lax::sub(lax::sub(g, rows(mean_g)), lax::mul(xhat, rows(mean_gx))));
    const Array dscale = lax::reduce_sum(lax::mul(dy, xhat), {0});
    run_cases({{name("layer_norm", dt),
                [=] { return lax::layer_norm(x, scale, bias, eps); },
                {{2, 4}, dt},
                values_of(y)},
               {name("layer_norm_dx", dt),
                [=] { return lax::layer_norm_dx(x, scale, dy, eps); },
                {{2, 4}, dt},
                values_of(dx)},
               {name("layer_norm_dscale", dt),
                [=] { return lax::layer_norm_dscale(x, dy, eps); },
                {{4}, dt},
                values_of(dscale)}});
  }
  const Array x = make(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK_THROWS_WITH_AS(lax::layer_norm(x, x, x, 1e-6), doctest::Contains("must be f32[3]"),
                       ValueError);
}
