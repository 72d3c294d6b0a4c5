// The reference checker's verdict on one hand-written case, as `flaxpp check` runs a file
// written by anyone: for the tests of each problem family's input errors.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "flaxpp/io/json.hpp"
#include "flaxpp/io/refs.hpp"

namespace flaxpp::testing {

// A float32 refs array of `shape` with small varied values.
inline refs::Json f32_array(std::vector<std::int64_t> shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape)
    n *= d;
  std::vector<double> data(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < data.size(); ++i)
    data[i] = 0.25 * static_cast<double>(i % 7) - 0.5;
  return refs::Json{{"dtype", "float32"}, {"shape", std::move(shape)}, {"data", std::move(data)}};
}

// The reason the one case of a document with `inputs` for `problem` failed.
inline std::string failure(const std::string& problem, refs::Json inputs) {
  const refs::Json doc{{"format", "flaxpp.refs/1"},
                       {"cases", refs::Json::array({refs::Json{{"id", "case"},
                                                               {"problem", problem},
                                                               {"inputs", std::move(inputs)},
                                                               {"expected", f32_array({1})}}})}};
  const refs::FileResult r = refs::check_document(doc, "test", Device::cpu());
  REQUIRE(r.cases.size() == 1);
  CHECK_FALSE(r.cases[0].passed);
  return r.cases[0].message;
}

}  // namespace flaxpp::testing
