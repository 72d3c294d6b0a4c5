#include "transforms/remat_values.hpp"

#include <limits>
#include <set>
#include <span>

namespace flaxpp::transforms {

std::string python_tuple(const std::vector<std::string>& items) {
  std::string out = "(";
  for (std::size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : ", ") + items[i];
  return out + (items.size() == 1 ? ",)" : ")");
}

std::string named_equivalent(const std::vector<RematPlan::Kept>& kept, std::size_t region,
                             const std::vector<NamedKept>& named) {
  for (const auto& [spelling, per_region] : named)
    if (region < per_region.size() && per_region[region] == kept) return spelling;
  std::set<std::string> names;
  for (const RematPlan::Kept& k : kept) {
    if (k.name.empty()) return "";
    names.insert(k.name);
  }
  if (names.empty()) return "";
  return checkpoint_policies::save_only_these_names({names.begin(), names.end()})->str();
}

namespace {

std::string python_shape(const Shape& s) {
  std::vector<std::string> dims;
  for (const std::int64_t d : s.dims())
    dims.push_back(std::to_string(d));
  return python_tuple(dims);
}

// What a JAX policy sees of an equation, as Python writes it:
// ('dot_general', ((2, 8, 16), (16, 32))).
std::string value_class(const std::string& primitive, std::span<const Shape> input_shapes) {
  std::vector<std::string> shapes;
  for (const Shape& s : input_shapes)
    shapes.push_back(python_shape(s));
  return "('" + primitive + "', " + python_tuple(shapes) + ")";
}

// Saves the equations of the classes named, recomputes the rest.
PolicyPtr save_classes(const std::set<std::string>& kept) {
  std::string spelled;
  for (const std::string& c : kept)
    spelled += (spelled.empty() ? "" : ", ") + c;
  return checkpoint_policies::custom(
      "lambda prim, *avals, **_: (prim.name, tuple(a.shape for a in avals)) in {" + spelled + "}",
      [kept](const ir::Primitive& p, std::span<const AVal> avals, const ir::Params&) {
        std::vector<Shape> shapes;
        for (const AVal& a : avals)
          shapes.push_back(a.shape);
        return kept.count(value_class(p.name(), shapes)) != 0 ? ir::Decision::save()
                                                              : ir::Decision::recompute();
      });
}

// What keeping the classes `kept` costs: the bytes the backward pass reads saved, and the
// modeled seconds of what it recomputes (the values it reads that are not kept, and what they
// need in turn, back to kept values and the region's inputs).
struct Outcome {
  std::int64_t bytes = 0;
  double seconds = 0;
};

class Weigher {
 public:
  explicit Weigher(const RegionValues& v) : values_(v) {
    for (const RegionValues::Node& n : v.nodes)
      classes_.push_back(value_class(n.primitive, n.input_shapes));
  }
  const std::vector<std::string>& classes() const { return classes_; }

  Outcome weigh(const std::set<std::string>& kept) const {
    const std::size_t n = values_.nodes.size();
    std::vector<bool> recomputed(n, false);
    std::set<std::pair<std::size_t, std::size_t>> saved;
    std::vector<std::pair<std::size_t, std::size_t>> stack;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < values_.nodes[i].read.size(); ++j)
        if (values_.nodes[i].read[j]) stack.emplace_back(i, j);
    Outcome out;
    while (!stack.empty()) {
      const auto [i, j] = stack.back();
      stack.pop_back();
      const RegionValues::Node& node = values_.nodes[i];
      if (node.always_saved || kept.count(classes_[i]) != 0) {
        if (saved.emplace(i, j).second) out.bytes += node.output_bytes[j];
        continue;
      }
      if (recomputed[i]) continue;
      recomputed[i] = true;
      out.seconds += node.seconds;
      for (const auto& [producer, output] : node.operands)
        if (producer >= 0) stack.emplace_back(static_cast<std::size_t>(producer), output);
    }
    return out;
  }

 private:
  const RegionValues& values_;
  std::vector<std::string> classes_;
};

}  // namespace

std::vector<PolicyPtr> value_chain(const RegionValues& values) {
  const Weigher weigher(values);
  std::set<std::string> candidates;
  for (std::size_t i = 0; i < values.nodes.size(); ++i)
    if (!values.nodes[i].always_saved) candidates.insert(weigher.classes()[i]);
  std::set<std::string> kept;
  Outcome now = weigher.weigh(kept);
  std::vector<PolicyPtr> chain;
  while (true) {
    // The class with the most seconds saved per byte added; of those that add no bytes, the
    // one that saves the most.
    std::string best;
    Outcome best_outcome;
    double best_rate = 0, best_saved = 0;
    for (const std::string& c : candidates) {
      std::set<std::string> with = kept;
      with.insert(c);
      const Outcome o = weigher.weigh(with);
      const double saved = now.seconds - o.seconds;
      if (saved <= 0) continue;
      const std::int64_t added = o.bytes - now.bytes;
      const double rate =
          added <= 0 ? std::numeric_limits<double>::infinity() : saved / static_cast<double>(added);
      if (best.empty() || rate > best_rate || (rate == best_rate && saved > best_saved)) {
        best = c;
        best_rate = rate;
        best_saved = saved;
        best_outcome = o;
      }
    }
    if (best.empty()) break;
    kept.insert(best);
    candidates.erase(best);
    now = best_outcome;
    chain.push_back(save_classes(kept));
  }
  return chain;
}

}  // namespace flaxpp::transforms
