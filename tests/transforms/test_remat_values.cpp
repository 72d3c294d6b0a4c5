// The budget's value classes (src/transforms/remat_values.hpp): on a region written out by
// hand, the chain keeps first the class that saves the most modeled recomputation per byte,
// stops where keeping more saves nothing, never proposes what the reverse rules save anyway,
// and each proposal decides exactly as its Python spelling reads.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "flaxpp/ir/lax.hpp"
#include "src/transforms/remat_values.hpp"

using namespace flaxpp;
using transforms::RegionValues;

namespace {

RegionValues::Node node(std::string primitive, std::vector<Shape> inputs, double seconds, bool read,
                        std::vector<std::pair<std::ptrdiff_t, std::size_t>> operands) {
  return {.primitive = std::move(primitive),
          .input_shapes = std::move(inputs),
          .seconds = seconds,
          .output_bytes = {128},
          .read = {read},
          .operands = std::move(operands)};
}

// y = exp(x @ w) * 2, with an expensive exp: the backward pass reads exp's and mul's results
// (as it would when everything is kept), not the product's. A random draw (saved by its rule).
RegionValues region() {
  RegionValues v;
  v.nodes.push_back(
      node("dot_general", {Shape{8, 4}, Shape{4, 4}}, 1e-6, false, {{-1, 0}, {-1, 0}}));
  v.nodes.push_back(node("exp", {Shape{8, 4}}, 100e-6, true, {{0, 0}}));
  v.nodes.push_back(node("mul", {Shape{8, 4}, Shape{}}, 1e-6, true, {{1, 0}, {-1, 0}}));
  RegionValues::Node draw = node("random_bits", {Shape{2}}, 50e-6, true, {{-1, 0}});
  draw.always_saved = true;
  v.nodes.push_back(draw);
  return v;
}

ir::Decision::Kind decide(const PolicyPtr& p, const ir::Primitive& prim, std::vector<AVal> avals) {
  return p->decide(prim, avals, {}).kind;
}

}  // namespace

TEST_CASE("value_chain: the most recomputation saved per byte first, spelled as JAX reads it") {
  const std::vector<PolicyPtr> chain = transforms::value_chain(region());
  // exp first (keeping it spares exp and the product: 101 µs for 128 bytes), then mul (1 µs
  // for 128 bytes); then the product, which nothing recomputes any more, saves nothing.
  REQUIRE(chain.size() == 2);
  const std::string head =
      "lambda prim, *avals, **_: (prim.name, tuple(a.shape for a in avals)) in {";
  CHECK(chain[0]->str() == head + "('exp', ((8, 4),))}");
  CHECK(chain[1]->str() == head + "('exp', ((8, 4),)), ('mul', ((8, 4), ()))}");

  using K = ir::Decision::Kind;
  const AVal x{Shape{8, 4}, DType::f32}, other{Shape{8, 5}, DType::f32},
      scalar{Shape{}, DType::f32};
  CHECK(decide(chain[0], lax::exp_p, {x}) == K::save);
  CHECK(decide(chain[0], lax::exp_p, {other}) == K::recompute);  // another shape, another class
  CHECK(decide(chain[0], lax::mul_p, {x, scalar}) == K::recompute);
  CHECK(decide(chain[1], lax::mul_p, {x, scalar}) == K::save);
  CHECK(decide(chain[1], lax::mul_p, {x, x}) == K::recompute);
  CHECK(decide(chain[1], lax::dot_general_p, {x, AVal{Shape{4, 4}, DType::f32}}) == K::recompute);
}

TEST_CASE("value_chain: a region with nothing to recompute proposes nothing") {
  RegionValues v = region();
  for (RegionValues::Node& n : v.nodes)
    n.read = {false};
  CHECK(transforms::value_chain(v).empty());
  CHECK(transforms::value_chain(RegionValues{}).empty());
}

TEST_CASE("python_tuple: Python's spelling of tuples of none, one and several items") {
  CHECK(transforms::python_tuple({}) == "()");
  CHECK(transforms::python_tuple({"8"}) == "(8,)");
  CHECK(transforms::python_tuple({"8", "4"}) == "(8, 4)");
}

TEST_CASE("named_equivalent: a choice that keeps what a named policy keeps is said by its name") {
  using Kept = RematPlan::Kept;
  const Kept product{"dot_general", "f32[8,4]", 128, 512, ""};
  const Kept a{"name", "f32[8,4]", 128, 544, "a"}, b{"name", "f32[8,4]", 128, 576, "b"};
  // What two named policies keep in regions 0 and 1 when every region follows them.
  const std::vector<transforms::NamedKept> named = {
      {"everything_saveable", {{product, a, b}, {product}}},
      {"dots_saveable", {{product}, {product}}},
      {"nothing_saveable", {{}, {}}}};
  CHECK(transforms::named_equivalent({product}, 0, named) == "dots_saveable");
  CHECK(transforms::named_equivalent({product}, 1, named) == "everything_saveable");  // the first
  CHECK(transforms::named_equivalent({}, 0, named) == "nothing_saveable");
  // Kept values that are all checkpoint_name outputs: save_only_these_names, names sorted.
  CHECK(transforms::named_equivalent({b, a}, 0, named) == "save_only_these_names('a', 'b')");
  // Neither: a product beside a name, or a region no named policy was planned for.
  CHECK(transforms::named_equivalent({product, a}, 0, named).empty());
  CHECK(transforms::named_equivalent({product}, 2, named).empty());
}
