"""Runs the GPU bundle on the GPU machine and gives the verdict: started by scripts/gpu_run.sh
from the unpacked bundle (bundle.py describes it); docs/GPU.md says how to read it.

Phase A runs every CUDA job of ctest's list and memcheck concurrently on the one GPU; phase B
runs the benchmarks one at a time, alone, so that their timings hold. Every item has its own
time limit and one summary line; the summary table and a one-line PASS/FAIL total come last.
With --dry-run (no GPU needed) it checks the bundle instead: its tree, its loader path, that
every doctest suite lists its cases, and that every job starts and reports that it sees no GPU.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bundle import RunItem, is_elf, load_runlist, loader_path, tree_differences  # noqa: E402

TAIL_LINES = 60


@dataclass
class Outcome:
    item: RunItem
    verdict: str          # PASS, FAIL, TIMEOUT, SKIPPED, NOT RUN
    seconds: float
    detail: str = ""
    log: Path | None = None
    excused: bool = False  # NOT RUN because this machine cannot run it (no sanitizer here)

    @property
    def failed(self) -> bool:
        return self.verdict != "PASS" and not self.excused


class Runner:
    def __init__(self, root: Path, work: Path, env: dict[str, str], deadline: float):
        self.root, self.work, self.env, self.deadline = root, work, env, deadline

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def expand(self, arg: str) -> str:
        return arg.replace("{work}", str(self.work))

    def run(self, item: RunItem, command: list[str] | None = None,
            timeout: float | None = None, log_name: str | None = None) -> tuple[int | None, str, float, Path]:
        """Runs a command in the bundle's root with the item's environment; returns (exit status
        or None on time-out, output, seconds, log)."""
        command = [self.expand(a) for a in (command or item.command)]
        if command[0] == "python3":
            command[0] = os.environ.get("FLAXPP_BENCH_PYTHON", sys.executable)
        log = self.work / "logs" / f"{log_name or item.name}.log"
        env = {**self.env, **{k: self.expand(v) for k, v in item.env.items()}}
        limit = max(1.0, min(timeout or item.timeout_s, self.left()))
        start = time.monotonic()
        with open(log, "w") as out:
            out.write(f"$ {' '.join(command)}\n")
            out.flush()
            try:
                proc = subprocess.Popen(command, cwd=self.root, env=env, stdout=out,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            except OSError as e:
                out.write(f"cannot start: {e}\n")
                return 127, f"cannot start: {e}", 0.0, log
            try:
                rc: int | None = proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                rc = None
        return rc, log.read_text(errors="replace"), time.monotonic() - start, log


def matches(pattern: str, output: str) -> bool:
    """ctest's regular expressions: '.' matches newlines too (cmsys::RegularExpression)."""
    return re.search(pattern, output, re.DOTALL) is not None


def judge(item: RunItem, rc: int | None, output: str) -> tuple[str, str]:
    """ctest's rules, except that a skip is a failure: the job did not see the GPU."""
    if rc is None:
        return "TIMEOUT", f"still running after its limit ({item.timeout_s} s or the total's)"
    if any(matches(r, output) for r in item.skip_regex) or (
            item.skip_return_code is not None and rc == item.skip_return_code):
        return "SKIPPED", "it saw no GPU"
    if any(matches(r, output) for r in item.fail_regex):
        return "FAIL", "its output matches a FAIL_REGULAR_EXPRESSION"
    if item.pass_regex:
        ok = any(matches(r, output) for r in item.pass_regex)
        return ("PASS", "") if ok else ("FAIL", "its output lacks the expected line")
    ok = (rc == 0) != item.will_fail
    return ("PASS", "") if ok else ("FAIL", f"exit status {rc}")


def last_line(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    return lines[-1][:160] if lines else "(no output)"


def find_sanitizer() -> str | None:
    found = shutil.which("compute-sanitizer")
    candidates = ["/usr/local/cuda/bin/compute-sanitizer",
                  "/usr/local/cuda/compute-sanitizer/compute-sanitizer"]
    candidates += sorted(glob.glob("/usr/local/cuda*/**/compute-sanitizer", recursive=True))
    for c in [found] + candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def run_item(runner: Runner, item: RunItem) -> Outcome:
    if runner.left() < 5:
        return Outcome(item, "NOT RUN", 0.0, "no time left in the total limit")
    command = list(item.command)
    if command[0] == "{compute-sanitizer}":
        sanitizer = find_sanitizer()
        if not sanitizer:
            return Outcome(item, "NOT RUN", 0.0, "compute-sanitizer not found on PATH or under "
                           "/usr/local/cuda*", excused=True)
        command[0] = sanitizer
    rc, output, seconds, log = runner.run(item, command)
    if item.name == "memcheck" and re.search(r"device not supported|error 999|unable to "
                                             r"(start|initialize)", output, re.I):
        return Outcome(item, "NOT RUN", seconds, "compute-sanitizer cannot run on this device",
                       log, excused=True)
    verdict, why = judge(item, rc, output)
    if item.name == "memcheck" and verdict == "TIMEOUT":
        reports = len(re.findall(r"^========= (Invalid|Error|Program hit)", output, re.M))
        why = f"cut short by its budget; the sanitizer had reported {reports} errors until then"
    detail = why if verdict == "PASS" else f"{why}; last line: {last_line(output)}"
    return Outcome(item, verdict, seconds, detail if verdict != "PASS" else "", log)


def dry_check(runner: Runner, item: RunItem) -> Outcome:
    """Without a GPU: the job starts with the bundle's loader path and says it sees no GPU;
    a doctest suite lists its cases; a Python script compiles."""
    start = time.monotonic()
    binary = next((a for a in item.command if a.startswith("build/")), None)
    if item.command[0] == "python3":
        script = item.command[1]
        rc, output, _, log = runner.run(item, ["python3", "-m", "py_compile", script], 60)
        ok = rc == 0
        return Outcome(item, "PASS" if ok else "FAIL", time.monotonic() - start,
                       "" if ok else f"{script} does not compile: {last_line(output)}", log)
    if item.doctest and binary:
        plain = RunItem(name=item.name, command=[binary, "--list-test-cases"])
        rc, output, _, log = runner.run(plain, timeout=60, log_name=f"{item.name}.list")
        cases = re.search(r"\[doctest\] unskipped test cases passing the current filters: (\d+)",
                          output)
        if rc != 0 or not cases or int(cases.group(1)) == 0:
            return Outcome(item, "FAIL", time.monotonic() - start,
                           f"{binary} does not list its cases: {last_line(output)}", log)
    if item.command[0] == "{compute-sanitizer}":
        return Outcome(item, "PASS", time.monotonic() - start, "its suite lists its cases; "
                       "compute-sanitizer itself runs only on the GPU machine")
    rc, output, _, log = runner.run(item, timeout=120)
    verdict, why = judge(item, rc, output)
    if verdict == "SKIPPED":
        return Outcome(item, "PASS", time.monotonic() - start, "starts, and sees no GPU", log)
    return Outcome(item, "FAIL", time.monotonic() - start,
                   f"expected it to start and report no GPU; got {verdict}: {why}; "
                   f"last line: {last_line(output)}", log)


def check_loader(root: Path, env: dict[str, str]) -> list[str]:
    """Every carried ELF file's libraries resolve with the bundle's loader path, and so do its
    symbols (ldd -r: a library of another version would fail lazily, mid-test)."""
    missing = []
    for f in sorted(p for d in ("build", "lib") for p in (root / d).rglob("*")
                    if p.is_file() and is_elf(p)):
        out = subprocess.run(["ldd", "-r", str(f)], env=env, capture_output=True, text=True)
        text = out.stdout + out.stderr
        for lib in re.findall(r"^\s*(\S+) => not found", text, re.M):
            missing.append(f"{lib} (needed by {f.relative_to(root)})")
        for symbol in re.findall(r"^undefined symbol: (\S+)", text, re.M)[:3]:
            missing.append(f"the symbol {symbol} (needed by {f.relative_to(root)})")
    return missing


def check_blas(runner: Runner, cli: str, soname: str) -> str | None:
    """The CPU backend dlopens BLAS by its soname, which no NEEDED list shows: a short CPU
    benchmark must load it from the bundle's lib/. Returns the problem, if any."""
    item = RunItem(name="blas", env={"LD_DEBUG": "files"}, command=[
        cli, "bench", "--device", "cpu", "--width", "64", "--steps", "1", "--out",
        "{work}/blas.jsonl"])
    rc, output, _, _ = runner.run(item, timeout=120)
    loaded = re.findall(rf"calling init: (\S*/{re.escape(soname)})\s", output)
    if rc != 0 or not loaded:
        return f"a CPU product did not load {soname} (exit status {rc}): {last_line(output)}"
    if not all(Path(p).resolve().parent == runner.root / "lib" for p in loaded):
        return f"{soname} was loaded from {', '.join(loaded)}, not from the bundle's lib/"
    return None


def gpus() -> list[str]:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [ln for ln in out.stdout.splitlines() if ln.startswith("GPU ")]


def extra_refs(paths: list[str]) -> list[str]:
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(glob.glob(os.path.join(p, "*.json")))
        elif os.path.isfile(p):
            files.append(os.path.abspath(p))
        else:
            raise SystemExit(f"gpu_run: --refs {p}: no such file or folder")
    return [os.path.abspath(f) for f in files]


def write_out(out: Path, work: Path, outcomes: list[Outcome], summary: str) -> None:
    """At most 8 files, none in a folder: summary, failures, the logs' archive, the tables."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.txt").write_text(summary)
    failed = [o for o in outcomes if o.failed and o.log]
    if failed:
        with open(out / "failures.log", "w") as f:
            for o in failed:
                lines = o.log.read_text(errors="replace").splitlines()
                f.write(f"===== {o.item.name}: {o.verdict} ({o.detail})\n")
                f.write("\n".join(lines[-TAIL_LINES:]) + "\n")
    with tarfile.open(out / "logs.tar.gz", "w:gz") as tar:
        tar.add(work, arcname="gpu_run")
    for f in ("kernel_bench.jsonl", "bench/table.md", "bench/lm_table.md",
              "bench/step_time.png", "bench/peak_memory.png"):
        if (work / f).is_file():
            shutil.copy2(work / f, out / Path(f).name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", type=Path, required=True, help="the unpacked bundle's root")
    ap.add_argument("--tree", type=Path, required=True, help="the tree it was carried with")
    ap.add_argument("--dry-run", action="store_true", help="check the bundle; no GPU needed")
    ap.add_argument("--only", metavar="REGEX", help="run only the items whose name matches")
    ap.add_argument("--tc", metavar="PATTERN", help="doctest cases to run in the suites (-tc=)")
    ap.add_argument("--phase", choices=("A", "B"), help="run only this phase")
    ap.add_argument("--refs", nargs="+", default=[], metavar="PATH",
                    help="more reference files, or folders of them, to check on the GPU")
    ap.add_argument("--limit", type=float, default=float(os.environ.get("GPU_RUN_LIMIT", 540)),
                    help="the whole run's limit in seconds (default 540: commands end at 600)")
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1))
    a = ap.parse_args()
    t0 = time.monotonic()
    root = a.bundle.resolve()

    changed = [c for c in tree_differences(a.tree, root / "tree.sha256")
               if not c.split(" ")[0].endswith(".md")]
    if changed:
        print(f"gpu_run: the bundle was built from another tree: {len(changed)} files differ "
              f"({', '.join(changed[:5])}{', ...' if len(changed) > 5 else ''}). Run "
              "'bash scripts/gpu_pack.sh' there again and carry .gpu-carry/ anew.")
        return 2
    dirs = loader_path(root)
    env = {**os.environ, "LD_LIBRARY_PATH": ":".join(
        dirs + [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p])}
    missing = check_loader(root, env)
    if missing:
        print(f"gpu_run: libraries not found with the loader path {':'.join(dirs)}: "
              f"{'; '.join(missing[:8])}. Install them (cuDNN and NCCL: the nvidia-cudnn-cu13 "
              "and nvidia-nccl-cu13 wheels) or put their folder on LD_LIBRARY_PATH.")
        return 2
    devices = gpus()
    if not devices and not a.dry_run:
        print("gpu_run: no NVIDIA GPU is visible (nvidia-smi lists none): nothing was run, "
              "nothing passed. Check the bundle without one with --dry-run.")
        return 3

    items = load_runlist(root / "runlist.json")
    refs = extra_refs(a.refs)
    if refs:
        cli = next(i for i in items if i.name == "flaxpp_check_refs_on_cuda").command[0]
        items.append(RunItem(name="check_extra_refs", command=[cli, "check", "--device", "cuda",
                             *refs], skip_regex=["no CUDA GPU is visible"]))
    items = [i for i in items if (not a.only or re.search(a.only, i.name))
             and (not a.phase or i.phase == a.phase)]
    if not items:
        print(f"gpu_run: no item matches --only {a.only!r} --phase {a.phase}")
        return 2
    if a.tc:
        for i in items:
            if i.doctest:
                i.command = i.command + [f"-tc={a.tc}"]

    work = root / "work"
    shutil.rmtree(work, ignore_errors=True)
    (work / "logs").mkdir(parents=True)
    (work / "bench").mkdir()
    runner = Runner(root, work, env, t0 + a.limit)
    built = json.loads((root / "built.json").read_text())
    problem = check_blas(runner, built["cli"], built["blas_soname"])
    if problem:
        print(f"gpu_run: {problem}")
        return 2
    check = dry_check if a.dry_run else run_item
    header = [f"gpu_run: bundle of commit {built['commit'][:12]}"
              + (f" + {built['uncommitted_changes']} uncommitted changes"
                 if built["uncommitted_changes"] else "") + f", sm_{built['cuda_architectures']}",
              "gpu_run: " + ("dry run, no GPU used" if a.dry_run else "; ".join(devices)),
              f"gpu_run: loader path {':'.join(dirs)}"]
    print("\n".join(header), flush=True)

    outcomes: list[Outcome] = []
    # memcheck, the longest, first; the jobs in ctest's order after it.
    phase_a = sorted((i for i in items if i.phase == "A"), key=lambda i: i.name != "memcheck")
    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        for o in pool.map(lambda i: check(runner, i), phase_a):
            outcomes.append(o)
            print(f"  {o.verdict:8s} {o.item.name} ({o.seconds:.0f} s)", flush=True)
    for i in (i for i in items if i.phase == "B"):           # alone, one at a time
        o = check(runner, i)
        outcomes.append(o)
        print(f"  {o.verdict:8s} {o.item.name} ({o.seconds:.0f} s)", flush=True)

    width = max(len(o.item.name) for o in outcomes)
    rows = [f"{o.verdict:8s} {o.item.name:{width}s} {o.item.phase} {o.seconds:6.1f} s  {o.detail}"
            .rstrip() for o in outcomes]
    failed = [o.item.name for o in outcomes if o.failed]
    not_run = [o.item.name for o in outcomes if o.excused]
    kind = "dry run" if a.dry_run else "GPU verdict"
    total = (f"gpu_run: {'FAIL' if failed else 'PASS'}: {kind}, {len(outcomes) - len(failed) - len(not_run)}"
             f" of {len(outcomes)} passed"
             + (f"; failed: {', '.join(failed)}" if failed else "")
             + (f"; not run: {', '.join(not_run)}" if not_run else "")
             + f"; {time.monotonic() - t0:.0f} s")
    summary = "\n".join(header + [""] + rows + ["", total]) + "\n"
    out = Path(os.environ["OUT"]) if os.environ.get("OUT") else root.parent / "gpu_run_out"
    write_out(out, work, outcomes, summary)
    for table in ("bench/table.md", "bench/lm_table.md"):
        if (work / table).is_file():
            print(f"\n{(work / table).read_text()}")
    print(f"gpu_run: logs and tables in {out}\n\n{summary}", end="")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
