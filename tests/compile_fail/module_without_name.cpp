// Must not compile: a module without a name. The compiler's message must say how to name it
// (ctest flaxpp_compile_error_module_name checks the static_assert's text).
#include "flaxpp/nn/dense.hpp"
#include "flaxpp/nn/scope.hpp"

struct Unnamed {
  flaxpp::Array operator()(flaxpp::nn::Scope& s, const flaxpp::Array& x) const {
    return s(flaxpp::nn::Dense{.features = 2}, x);
  }
};

int main() {
  const flaxpp::Array x = flaxpp::Array::from_vector(std::vector<float>{1.0f}, flaxpp::Shape{1, 1});
  (void)flaxpp::nn::Model(Unnamed{}).init(flaxpp::random::key(0), x);
}
