// Must not compile: a module called with inputs its operator() does not take (ctest
// flaxpp_compile_error_module_inputs checks the static_assert's text).
#include "flaxpp/nn/dense.hpp"
#include "flaxpp/nn/scope.hpp"

struct Twice {
  static constexpr const char* name = "Twice";
  flaxpp::Array operator()(flaxpp::nn::Scope& s, const flaxpp::Array& x) const {
    return s(flaxpp::nn::Dense{.features = 2}, x, x);  // Dense takes one input
  }
};

int main() {
  const flaxpp::Array x = flaxpp::Array::from_vector(std::vector<float>{1.0f}, flaxpp::Shape{1, 1});
  (void)flaxpp::nn::Model(Twice{}).init(flaxpp::random::key(0), x);
}
