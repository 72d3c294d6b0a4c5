// The umbrella header stays light: it compiles on its own and brings no JSON library, reference
// harness or spec parser into a user's file (issue 17). Built with the tests; nothing to run.
#include <flaxpp/flaxpp.hpp>

#ifdef NLOHMANN_JSON_VERSION_MAJOR
#error "flaxpp/flaxpp.hpp includes nlohmann/json: a tool header slipped into the umbrella"
#endif

int main() {
  return flaxpp::Array::scalar(1.0f).item<float>() == 1.0f ? 0 : 1;
}
