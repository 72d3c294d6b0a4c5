// doctest's main for every suite. Suites compute on the CPU unless FLAXPP_DEVICE names another
// device: ctest reruns the backend, transforms, nn and optim suites with FLAXPP_DEVICE=cuda, so
// the same cases exercise the CUDA backend. Asked for a GPU where none is visible, a suite
// says so loudly and ctest reports it skipped, never passed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>
#include <iostream>
#include <string_view>

#include "flaxpp/core/device.hpp"
#include "flaxpp/core/error.hpp"

int main(int argc, char** argv) {
  // jit verifies every graph after every pass in the tests.
  setenv("FLAXPP_VERIFY_PASSES", "1", 0);
  const char* env = std::getenv("FLAXPP_DEVICE");
  const bool device_named = env != nullptr && *env != '\0';
  try {
    if (!device_named) flaxpp::set_default_device(flaxpp::Device::cpu());
    const flaxpp::Device device = flaxpp::default_device();
    std::cout << "[flaxpp] default device: " << device << "\n";
  } catch (const flaxpp::Error& e) {
    if (device_named && std::string_view(env).substr(0, 4) == "cuda" &&
        !flaxpp::is_available(flaxpp::DeviceKind::cuda)) {
      std::cout << "NO CUDA GPU VISIBLE: FLAXPP_DEVICE=" << env
                << " asks for one; this suite was SKIPPED and proves nothing about CUDA\n";
      return 0;
    }
    std::cerr << e.what() << "\n";
    return 1;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
