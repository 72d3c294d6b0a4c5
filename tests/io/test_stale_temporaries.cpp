// io::remove_stale_temporaries: it deletes only what write_file_atomically left behind for
// that path, and only when the writing process is gone.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "flaxpp/io/checkpoint.hpp"
#include "harness/temp_dir.hpp"

using namespace flaxpp;
using flaxpp::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// The pid of a process that has exited (and been reaped).
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

}  // namespace

TEST_CASE("remove_stale_temporaries: removes a dead writer's file, keeps everything else") {
  TempDir dir;
  const std::string target = dir / "checkpoint.json";
  const pid_t dead = dead_pid();
  const std::string stale = dir.write(detail::str("checkpoint.json.tmp-", dead), "partial");
  const std::vector<std::string> kept = {
      dir.write(detail::str("checkpoint.json.tmp-", ::getpid()), "ours, being written"),
      dir.write(detail::str("checkpoint.json.tmp-", ::getppid()), "a live process's"),
      dir.write("checkpoint.json.tmp-12ab", "not a pid"),
      dir.write("checkpoint.json.tmp-", "no pid"),
      dir.write(detail::str("metrics.csv.tmp-", dead), "another file's"),
      dir.write(detail::str("xcheckpoint.json.tmp-", dead), "another name"),
      dir.write("checkpoint.json", "the file itself"),
  };
  fs::create_directory(dir / detail::str("checkpoint.json.tmp-", dead + 1));  // not a file

  const std::vector<std::string> removed = io::remove_stale_temporaries(target);
  CHECK(removed == std::vector<std::string>{stale});
  CHECK(!fs::exists(stale));
  for (const auto& f : kept) {
    CAPTURE(f);
    CHECK(fs::exists(f));
  }
  CHECK(io::remove_stale_temporaries(target).empty());
  CHECK(io::remove_stale_temporaries(dir / "missing_dir/checkpoint.json").empty());
}
