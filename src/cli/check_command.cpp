// `flaxpp check FILE… [--device cpu|cuda] [--verbose]` (refs-format.md, "flaxpp check").
#include <iostream>

#include "cli/commands.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/device.hpp"
#include "flaxpp/io/refs.hpp"

namespace flaxpp::cli {
namespace {
constexpr const char* kCheckUsage =
    "usage: flaxpp check FILE... [--device cpu|cuda|cuda:N] [--verbose]\n"
    "  Runs every reference case of every FILE and compares with the expected values.\n"
    "  Prints each failing case, then 'N passed, M failed'. Exit code: 0 all passed,\n"
    "  1 some case failed, 2 a file could not be read as a flaxpp.refs/1 document.\n"
    "  --device   where to compute (default: the default device: FLAXPP_DEVICE, else the GPU if\n"
    "             present, else cpu)\n"
    "  --verbose  also list the cases that pass\n";
}  // namespace

int check_command(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  bool verbose = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << kCheckUsage;
      return 0;
    } else if (a == "--verbose" || a == "-v") {
      verbose = true;
    } else if (a == "--device" || a.rfind("--device=", 0) == 0) {
      std::string value;
      if (a == "--device") {
        if (i + 1 == args.size()) {
          std::cerr << "flaxpp check: --device needs a value (cpu, cuda or cuda:N)\n";
          return 2;
        }
        value = args[++i];
      } else {
        value = a.substr(9);
      }
      // Everything the cases create (parameters, literals) goes there too, not only their
      // inputs; a clear DeviceError now if that device is unavailable.
      set_default_device(Device::parse(value));
    } else if (a.rfind("--", 0) == 0) {
      std::cerr << "flaxpp check: unknown option " << a << "\n" << kCheckUsage;
      return 2;
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    std::cerr << "flaxpp check: no reference files given\n" << kCheckUsage;
    return 2;
  }
  return refs::check_files(files, default_device(), verbose, std::cout).exit_code();
}

}  // namespace flaxpp::cli
