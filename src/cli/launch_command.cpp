// `flaxpp launch -n N [--] COMMAND ARGS...`: runs `flaxpp COMMAND ARGS...` as a job of N
// processes under Open MPI's mpirun (the launcher flaxpp::dist joins), e.g.
// `flaxpp launch -n 2 -- train cfg.json`. It adds what a job on one machine needs: mpirun's
// consent to run as root, oversubscription when N exceeds the cores, an even share of the
// cores as each process's product threads (unless FLAXPP_NUM_THREADS is set), and Ctrl-C and
// SIGTERM passed on so that a training job stops with a checkpoint and exits 130 or 143.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/mpirun.hpp"

namespace flaxpp::cli {
namespace {

constexpr const char* kLaunchUsage =
    "usage: flaxpp launch -n N [--] COMMAND [ARGS...]\n"
    "  Runs flaxpp COMMAND ARGS... as N processes on this machine under Open MPI's mpirun\n"
    "  (FLAXPP_MPIRUN names another one), e.g. flaxpp launch -n 2 -- train cfg.json: the\n"
    "  processes train data-parallel (see flaxpp help train). Each process's matrix products\n"
    "  get cores / N threads unless FLAXPP_NUM_THREADS is set. For several machines, run\n"
    "  mpirun yourself:\n"
    "  mpirun -np N --hostfile HOSTS flaxpp train cfg.json.\n"
    "  Ctrl-C or SIGTERM is passed on: a training job stops at one step on every process,\n"
    "  saves a checkpoint and exits 130 or 143.\n"
    "  -n, --processes N  how many processes (1 to 1024)\n";

// The running mpirun, for the signal handler.
std::atomic<pid_t> g_mpirun{0};

// Ctrl-C (SIGINT) and SIGTERM to flaxpp launch, passed on to the job's processes. mpirun
// itself answers SIGINT and SIGTERM by ending the job (SIGTERM to every process, SIGKILL a
// second later) and exiting 1, but forwards SIGUSR1 and SIGUSR2 to the processes: flaxpp train
// under launch takes those as SIGINT and SIGTERM (kLaunchStopSignalsEnv), stops at a step
// boundary on every process with one checkpoint, and exits 130 or 143, which mpirun returns.
extern "C" void forward_stop_signal(int signal) {
  if (const pid_t pid = g_mpirun.load(); pid > 0) ::kill(pid, signal == SIGINT ? SIGUSR1 : SIGUSR2);
}

// Runs mpirun (argv) as a child in a process group of its own, so that a terminal's Ctrl-C
// reaches flaxpp launch alone and is forwarded as above; returns its exit status (128 + the
// signal when a signal ended it). Throws Error, with the hint, when mpirun cannot be run.
int run_mpirun(const std::vector<char*>& argv) {
  int failed[2];  // the child's exec errno; closed unwritten when the exec succeeds
  if (::pipe2(failed, O_CLOEXEC) != 0)
    throw Error(detail::str("cannot start ", argv[0], " (pipe: ", std::strerror(errno), ")"));
  // Held back until the handler knows mpirun's pid: none is lost, none ends launch early.
  sigset_t stops, before;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &stops, &before);
  const pid_t child = ::fork();
  if (child < 0) {
    const int err = errno;
    ::sigprocmask(SIG_SETMASK, &before, nullptr);
    ::close(failed[0]);
    ::close(failed[1]);
    throw Error(detail::str("cannot start ", argv[0], " (fork: ", std::strerror(err), ")"));
  }
  if (child == 0) {
    ::close(failed[0]);
    ::setpgid(0, 0);
    ::sigprocmask(SIG_SETMASK, &before, nullptr);
    ::execvp(argv[0], argv.data());
    const int err = errno;
    (void)!::write(failed[1], &err, sizeof err);
    ::_exit(127);
  }
  ::close(failed[1]);
  g_mpirun = child;
  std::signal(SIGINT, forward_stop_signal);
  std::signal(SIGTERM, forward_stop_signal);
  ::sigprocmask(SIG_SETMASK, &before, nullptr);
  int err = 0;
  ssize_t got;
  while ((got = ::read(failed[0], &err, sizeof err)) < 0 && errno == EINTR) {
  }
  ::close(failed[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (got == static_cast<ssize_t>(sizeof err))
    throw Error(detail::str("cannot run ", argv[0], " (", std::strerror(err),
                            "): ", no_mpirun_hint(argv[0])));
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

}  // namespace

int launch_command(const std::vector<std::string>& args) {
  std::int64_t processes = 0;
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << kLaunchUsage;
      return 0;
    } else if (a == "-n" || a == "--processes") {
      processes = parse_int_option(a, option_value(args, i), 1, 1024);
    } else if (a == "--") {
      ++i;
      break;
    } else if (a.starts_with("-")) {
      throw UsageError(detail::str("unknown option ", a));
    } else {
      break;
    }
  }
  if (processes == 0) throw UsageError("-n N (how many processes) is required");
  if (i == args.size())
    throw UsageError("no command to launch; e.g. flaxpp launch -n 2 -- train cfg.json");
  if (args[i] == "launch") throw UsageError("flaxpp launch cannot launch itself");

  set_product_threads(cores() / processes, false);
  ::setenv(kLaunchStopSignalsEnv, "1", 1);
  std::vector<std::string> argv = mpirun_command(
      processes,
      std::vector<std::string>(args.begin() + static_cast<std::ptrdiff_t>(i), args.end()));
  // mpirun reads no terminal: it runs in a process group of its own (below).
  argv.insert(argv.begin() + 1, {"--stdin", "none"});
  std::vector<char*> c_argv;
  for (std::string& s : argv)
    c_argv.push_back(s.data());
  c_argv.push_back(nullptr);
  std::cout.flush();
  return run_mpirun(c_argv);
}
}  // namespace flaxpp::cli
