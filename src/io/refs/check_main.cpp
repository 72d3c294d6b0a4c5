// refs::check_main: `flaxpp check FILE… [--device cpu|cuda] [--verbose] [--case-timeout
// SECONDS]` (refs-format.md, "flaxpp check") over any problem registry, with a watchdog that
// ends a case stuck past its time limit. `flaxpp check` and a user's own check program run it.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/device.hpp"
#include "flaxpp/io/refs.hpp"

namespace flaxpp::refs {
namespace {
// The usage after "usage: PROGRAM".
constexpr const char* kUsage =
    " FILE... [--device cpu|cuda|cuda:N] [--verbose] [--case-timeout SECONDS]\n"
    "  Runs every reference case of every FILE and compares with the expected values.\n"
    "  Prints each failing case, then 'N passed, M failed'. Exit code: 0 all passed,\n"
    "  1 some case failed, 2 a file could not be read as a flaxpp.refs/1 document.\n"
    "  --device        where to compute (default: the default device: FLAXPP_DEVICE, else the\n"
    "                  GPU if present, else cpu)\n"
    "  --verbose       also list the cases that pass\n"
    "  --case-timeout  a case still running after SECONDS fails (default 300; 0: no limit).\n"
    "                  It is stopped between the steps of its computation (training steps,\n"
    "                  layers); one stuck inside a single computation ends the whole run at twice\n"
    "                  the limit, after the results so far are printed.\n"
    "  A case whose sizes need more host memory than is available fails before it starts.\n";

// The longest --case-timeout: about 30 years, far below what the clock's arithmetic can hold.
constexpr std::int64_t kMaxTimeoutSeconds = 1'000'000'000;

// Ends the process when a case runs past twice its time limit: such a case is stuck inside one
// computation that the cooperative limit (CaseContext::check_time) cannot interrupt. The
// results so far were printed (check_files flushes after each case); it prints the stuck case
// and the summary, then exits with 1 (a case failed).
class Watchdog {
 public:
  explicit Watchdog(std::chrono::seconds limit) : limit_(limit), thread_([this] { watch(); }) {}
  ~Watchdog() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void started(const std::string& label) {
    {
      const std::lock_guard lock(mutex_);
      label_ = label;
      since_ = std::chrono::steady_clock::now();
      running_ = true;
    }
    wake_.notify_one();
  }
  void done(bool passed) {
    const std::lock_guard lock(mutex_);
    running_ = false;
    ++(passed ? passed_ : failed_);
  }

 private:
  void watch() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      if (!running_) {
        wake_.wait(lock);
        continue;
      }
      const auto end = since_ + 2 * limit_;
      wake_.wait_until(lock, end);
      if (running_ && !stop_ && std::chrono::steady_clock::now() >= end) stop_run();
    }
  }

  // Called with the lock held; never returns.
  [[noreturn]] void stop_run() const {
    const std::string text = detail::str(
        "FAIL  ", label_, "\n      still running ", 2 * limit_.count(),
        " s after it started, twice its time limit of ", limit_.count(),
        " s, inside one computation that cannot be interrupted; the run stops here and the "
        "cases after it did not run (raise the limit with --case-timeout SECONDS, 0 for none)\n",
        passed_, " passed, ", failed_ + 1, " failed\n");
    // The main thread is inside the stuck case and writes nothing now; std::cout was flushed.
    for (std::size_t done = 0; done < text.size();) {
      const ssize_t n = ::write(STDOUT_FILENO, text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    std::_Exit(1);
  }

  const std::chrono::seconds limit_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false, running_ = false;
  std::string label_;
  std::chrono::steady_clock::time_point since_;
  std::int64_t passed_ = 0, failed_ = 0;
  std::thread thread_;  // last: starts once the members it reads exist
};

// The value of an option given as "--name VALUE" or "--name=VALUE"; nothing (after printing
// why) when it is missing.
std::optional<std::string> option_value(const std::vector<std::string>& args, std::size_t& i,
                                        const std::string& name, const char* what,
                                        std::string_view program) {
  const std::string& a = args[i];
  if (a.size() > name.size() && a[name.size()] == '=') return a.substr(name.size() + 1);
  if (i + 1 == args.size()) {
    std::cerr << program << ": " << name << " needs a value (" << what << ")\n";
    return std::nullopt;
  }
  return args[++i];
}

bool is_option(const std::string& a, const std::string& name) {
  return a == name || a.rfind(name + "=", 0) == 0;
}

}  // namespace

int check_main(const std::vector<std::string>& args, const ProblemRegistry& registry,
               std::string_view program) {
  const std::string usage = detail::str("usage: ", program, kUsage);
  std::vector<std::string> files;
  bool verbose = false;
  CheckOptions options;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << usage;
      return 0;
    } else if (a == "--verbose" || a == "-v") {
      verbose = true;
    } else if (is_option(a, "--device")) {
      const auto value = option_value(args, i, "--device", "cpu, cuda or cuda:N", program);
      if (!value) return 2;
      // Everything the cases create (parameters, literals) goes there too, not only their
      // inputs; a clear DeviceError now if that device is unavailable.
      set_default_device(Device::parse(*value));
    } else if (is_option(a, "--case-timeout")) {
      const auto value =
          option_value(args, i, "--case-timeout", "seconds; 0 for no limit", program);
      if (!value) return 2;
      std::int64_t seconds = -1;
      const auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), seconds);
      if (ec != std::errc() || end != value->data() + value->size() || seconds < 0 ||
          seconds > kMaxTimeoutSeconds) {
        std::cerr << "flaxpp check: --case-timeout takes a whole number of seconds from 0 (no "
                     "limit) to "
                  << kMaxTimeoutSeconds << ", got \"" << *value << "\"\n";
        return 2;
      }
      options.case_timeout = std::chrono::seconds(seconds);
    } else if (a.rfind("--", 0) == 0) {
      std::cerr << "flaxpp check: unknown option " << a << "\n" << usage;
      return 2;
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    std::cerr << "flaxpp check: no reference files given\n" << usage;
    return 2;
  }
  std::optional<Watchdog> watchdog;
  if (options.case_timeout.count() > 0) {
    watchdog.emplace(std::chrono::duration_cast<std::chrono::seconds>(options.case_timeout));
    options.on_case_start = [&](const std::string& label) { watchdog->started(label); };
    options.on_case_done = [&](const CaseResult& c) { watchdog->done(c.passed); };
  }
  return check_files(files, default_device(), verbose, std::cout, options, registry).exit_code();
}

int check_main(int argc, char** argv, const ProblemRegistry& registry) {
  const std::vector<std::string> args(argv + std::min(argc, 1), argv + std::max(argc, 0));
  return check_main(args, registry, argc > 0 ? argv[0] : "check");
}

}  // namespace flaxpp::refs
