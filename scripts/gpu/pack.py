"""Packs a built carry configuration into the GPU bundle (bundle.py describes it), checking here
what can be checked without a GPU. Called by scripts/gpu_pack.sh after its build; needs
python3, readelf, objdump, ldconfig and tar with xz.

    python3 scripts/gpu/pack.py --build build-carry --out .gpu-carry

The run list is ctest's own test list: every job that ctest declares skipped without a GPU
(a SKIP_REGULAR_EXPRESSION naming a CUDA GPU: the CUDA suite, the *_on_cuda reruns, the
examples and the reference cases on CUDA, the kernel bench) and that does not name the CPU
(FLAXPP_DEVICE=cpu), so a CUDA test added tomorrow travels without anyone listing it; then
the runner's own items (memcheck, the benchmarks).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bundle import (ARCHIVE, PROVIDED, TOP, RunItem, is_elf, save_runlist,  # noqa: E402
                    write_tree_record)

XZ_WINDOW = "512MiB"        # xz's dictionary: the uncompressed bundle must fit it to dedupe
GLIBC_FLOOR = (2, 34)      # Ubuntu 22.04 has 2.35, Debian 12 2.36: a floor with margin
GPU_SKIP = re.compile(r"cuda gpu", re.IGNORECASE)
MEMCHECK_SECONDS = 200


class PackError(Exception):
    pass


def run(cmd: list[str], **kw) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


# ---------------------------------------------------------------- the run list, from ctest

def ctest_jobs(build: Path) -> list[dict]:
    info = json.loads(run(["ctest", "--test-dir", str(build), "--show-only=json-v1"]))
    return info["tests"]


def properties(job: dict) -> dict:
    return {p["name"]: p["value"] for p in job.get("properties", [])}


class Paths:
    """Rewrites the build machine's absolute paths into the bundle's relative ones, noting
    which files must travel."""

    def __init__(self, repo: Path, build: Path):
        self.repo, self.build = repo, build
        self.files: set[str] = set()     # bundle-relative paths to copy

    def rewrite(self, text: str) -> str:
        # The build folder first: it may sit inside the repository.
        for root, prefix in ((self.build, "build"), (self.repo, "tree")):
            pattern = re.compile(re.escape(str(root)) + r"(/[^\s:;]*)?")

            def sub(m: re.Match, prefix=prefix, root=root) -> str:
                rel = (m.group(1) or "").lstrip("/")
                target = root / rel
                if target.is_file():
                    self.files.add(f"{prefix}/{rel}")
                elif rel:
                    raise PackError(f"a test names {target}, which is not a file: the bundle "
                                    "carries files only; name the file in the test")
                return f"{prefix}/{rel}" if rel else prefix
            text = pattern.sub(sub, text)
        return text


def job_items(jobs: list[dict], paths: Paths) -> list[RunItem]:
    items = []
    for job in jobs:
        props = properties(job)
        env = dict(e.split("=", 1) for e in props.get("ENVIRONMENT", []))
        if not any(GPU_SKIP.search(r) for r in props.get("SKIP_REGULAR_EXPRESSION", [])) or \
                env.get("FLAXPP_DEVICE") == "cpu":      # a CPU run of a GPU-aware job
            continue
        command = [paths.rewrite(a) for a in job["command"]]
        name = job["name"]
        doctest = name.startswith("flaxpp_") and name.endswith(("_tests", "_tests_on_cuda"))
        if name == "flaxpp_cuda_tests":
            env.setdefault("FLAXPP_REQUIRE_CUDNN", "1")   # cuDNN must run LayerNorm there
        items.append(RunItem(
            name=name, command=command, env={k: paths.rewrite(v) for k, v in env.items()},
            timeout_s=int(float(props.get("TIMEOUT", 300))),
            pass_regex=props.get("PASS_REGULAR_EXPRESSION", []),
            fail_regex=props.get("FAIL_REGULAR_EXPRESSION", []),
            skip_regex=props.get("SKIP_REGULAR_EXPRESSION", []),
            skip_return_code=props.get("SKIP_RETURN_CODE"),
            will_fail=bool(props.get("WILL_FAIL", False)), doctest=doctest))
    if not items:
        raise PackError("ctest lists no CUDA job: was the build configured with "
                        "-DFLAXPP_WITH_CUDA=ON?")
    return items


def own_items(paths: Paths, cli: str, cuda_tests: str, kernel_bench: str) -> list[RunItem]:
    """The runner's items beyond ctest's: memcheck in phase A, the benchmarks in phase B.
    ``{work}`` is the runner's work folder; ``{compute-sanitizer}`` is found on the GPU
    machine."""
    for script in sorted((paths.repo / "python_compat").glob("*.py")):
        paths.files.add(f"tree/python_compat/{script.name}")
    no_gpu = ["NO CUDA GPU VISIBLE", "no CUDA GPU is visible"]
    py = "python_compat"
    return [
        # NCCL's set-up under memcheck is slow and reports its own internals; the (large) cases
        # take minutes there. Both run unsanitised in flaxpp_cuda_tests itself.
        RunItem(name="memcheck", command=[
            "{compute-sanitizer}", "--tool", "memcheck", "--report-api-errors", "no",
            "--error-exitcode", "1", cuda_tests, "-tce=*(large)*,NCCL*"],
            timeout_s=MEMCHECK_SECONDS, skip_regex=no_gpu, doctest=True),
        RunItem(name="kernel_bench", phase="B", timeout_s=90, skip_regex=no_gpu,
                command=["bash", "-c", f"set -o pipefail; {kernel_bench} | tee "
                         "{work}/kernel_bench.jsonl"]),
        RunItem(name="bench_flaxpp", phase="B", timeout_s=150, skip_regex=no_gpu, command=[
            cli, "bench", "--device", "cuda", "--dtype", "bfloat16", "--out",
            "{work}/flaxpp.jsonl"]),
        RunItem(name="bench_jax", phase="B", timeout_s=180, command=[
            "python3", f"tree/{py}/bench_jax.py", "--platform", "cuda", "--dtype", "bfloat16",
            "--out", "{work}/jax.jsonl"]),
        RunItem(name="bench_table", phase="B", timeout_s=30, command=[
            "python3", f"tree/{py}/bench_compare.py", "{work}/flaxpp.jsonl", "{work}/jax.jsonl",
            "--out-dir", "{work}/bench"]),
        RunItem(name="bench_lm", phase="B", timeout_s=180, command=[
            "python3", f"tree/{py}/lm_speed.py", cli, "--platform", "cuda", "--repeat", "1",
            "--out", "{work}/bench/lm_table.md"]),
    ]


# ---------------------------------------------------------------- ELF checks

@functools.lru_cache(maxsize=None)
def needed(path: Path) -> list[str]:
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run(["readelf", "-d", str(path)]))


def glibc_floor(path: Path) -> tuple[int, ...]:
    versions = re.findall(r"\bGLIBC_([0-9.]+)\b", run(["objdump", "-T", str(path)]))
    return max((tuple(int(x) for x in v.split(".")) for v in versions), default=(0,))


def elf_section(path: Path, wanted: str) -> bytes | None:
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise PackError(f"{path}: not a 64-bit ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(i: int) -> tuple[int, int, int]:
        name, _, _, _, off, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        return name, off, size
    _, str_off, _ = header(shstrndx)
    for i in range(shnum):
        name, off, size = header(i)
        end = data.index(b"\0", str_off + name)
        if data[str_off + name:end].decode() == wanted:
            return data[off:off + size]
    return None


def fatbin_entries(section: bytes) -> list[tuple[str, int]]:
    """(kind, arch) of every entry of the fatbin containers in a .nv_fatbin section: kind
    "sass" (an ELF cubin) or "ptx". The CUDA 13 toolkit ships no cuobjdump, hence this."""
    entries, off = [], 0
    while off + 16 <= len(section):
        magic, _, header_size, fat_size = struct.unpack_from("<IHHQ", section, off)
        if magic != 0xBA55ED50:
            off += 8                      # containers are 8-byte aligned, padding between
            continue
        entry, end = off + header_size, off + header_size + fat_size
        while entry + 32 <= end:
            kind, _, ehsize, payload = struct.unpack_from("<HHIQ", section, entry)
            arch, = struct.unpack_from("<I", section, entry + 28)
            entries.append(({1: "ptx", 2: "sass"}.get(kind, f"kind{kind}"), arch))
            if ehsize == 0:
                break
            entry += ehsize + payload
        off = end
    return entries


def locate(soname: str) -> Path:
    for line in run(["ldconfig", "-p"]).splitlines():
        m = re.match(r"\s*(\S+) \(libc6,x86-64[^)]*\) => (\S+)", line)
        if m and m.group(1) == soname:
            return Path(m.group(2)).resolve()
    raise PackError(f"{soname} is needed but not installed here (ldconfig -p does not list it)")


def check_and_collect_libs(elves: list[Path], dlopened: list[str], lib_dir: Path) -> list[str]:
    """Copies into lib_dir every library the binaries need (NEEDED, and the known dlopen'ed
    sonames), transitively, that the GPU machine does not provide; fails on anything that would
    not load there. Returns the report lines."""
    report, queue, carried = [], list(dlopened), {}
    for elf in elves:
        queue += [s for s in needed(elf) if not PROVIDED.match(s)]
    while queue:
        soname = queue.pop()
        if soname in carried:
            continue
        src = locate(soname)
        shutil.copy2(src, lib_dir / soname)
        carried[soname] = src
        queue += [s for s in needed(src) if not PROVIDED.match(s)]
    for soname, src in sorted(carried.items()):
        report.append(f"carried {soname} ({src})")
    # With the system's folders out of the picture: every NEEDED soname of every carried file
    # is carried or provided by the GPU machine.
    for f in elves + [lib_dir / s for s in carried]:
        for s in needed(f):
            if not PROVIDED.match(s) and s not in carried:
                raise PackError(f"{f.name} needs {s}, which is neither carried nor provided")
    worst = max(((glibc_floor(f), f.name) for f in elves + [lib_dir / s for s in carried]))
    if worst[0] > GLIBC_FLOOR:
        raise PackError(f"{worst[1]} needs GLIBC_{'.'.join(map(str, worst[0]))}, above the "
                        f"bundle's floor {'.'.join(map(str, GLIBC_FLOOR))}: build on an older "
                        "glibc, or link that library dynamically")
    report.append(f"glibc needed: at most {'.'.join(map(str, worst[0]))} ({worst[1]}), floor "
                  f"{'.'.join(map(str, GLIBC_FLOOR))}")
    return report


def check_fatbins(elves: list[Path], arch: int) -> list[str]:
    report = []
    for f in elves:
        if not any(s.startswith("libcudart") for s in needed(f)):
            continue
        section = elf_section(f, ".nv_fatbin")
        entries = fatbin_entries(section) if section else []
        sass = sum(1 for k, a in entries if k == "sass" and a == arch)
        ptx = sum(1 for k, a in entries if k == "ptx" and a == arch)
        others = sorted({a for _, a in entries if a != arch})
        if sass == 0:
            raise PackError(f"{f.name}: no sm_{arch} code in its fatbin ({entries or 'none'}); "
                            f"configure with -DCMAKE_CUDA_ARCHITECTURES={arch}")
        report.append(f"{f.name}: sm_{arch} SASS x{sass}, compute_{arch} PTX x{ptx}"
                      + (f", other archs {others}" if others else ""))
    return report


# ---------------------------------------------------------------- the bundle

def cache_value(build: Path, key: str) -> str:
    m = re.search(rf"^{key}:[A-Z]+=(.*)$", (build / "CMakeCache.txt").read_text(), re.M)
    return m.group(1) if m else ""


def pack(repo: Path, build: Path, out: Path, arch: int) -> None:
    paths = Paths(repo, build)
    items = job_items(ctest_jobs(build), paths)
    tool = {n: paths.rewrite(str(build / rel)) for n, rel in (
        ("cli", "src/flaxpp"), ("cuda_tests", "tests/flaxpp_cuda_tests"),
        ("kernel_bench", "tests/flaxpp_kernel_bench"))}
    items += own_items(paths, tool["cli"], tool["cuda_tests"], tool["kernel_bench"])

    stage = Path(tempfile.mkdtemp(prefix="flaxpp-gpu-pack-"))
    try:
        root = stage / TOP
        for rel in sorted(paths.files):
            src = (build if rel.startswith("build/") else repo) / rel.split("/", 1)[1]
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / rel)
        (root / "lib").mkdir()
        (root / "gpu").mkdir()
        for f in ("bundle.py", "run.py"):
            shutil.copy2(Path(__file__).parent / f, root / "gpu" / f)
        elves = sorted(p for p in (root / "build").rglob("*") if p.is_file() and is_elf(p))
        blas = cache_value(build, "FLAXPP_BLAS_SONAME_LOADED")
        if not blas:
            raise PackError(f"{build}/CMakeCache.txt does not say which BLAS the CPU backend "
                            "loads (FLAXPP_BLAS_SONAME_LOADED): reconfigure the build")
        report = check_and_collect_libs(elves, [blas], root / "lib")
        report += check_fatbins(elves, arch)
        save_runlist(root / "runlist.json", items)
        write_tree_record(repo, root / "tree.sha256")
        commit = run(["git", "-C", str(repo), "rev-parse", "HEAD"]).strip()
        dirty = run(["git", "-C", str(repo), "status", "--porcelain"]).splitlines()
        (root / "built.json").write_text(json.dumps({
            "commit": commit, "uncommitted_changes": len(dirty), "cli": tool["cli"],
            "blas_soname": blas,
            "cuda_architectures": cache_value(build, "CMAKE_CUDA_ARCHITECTURES"),
            "build_type": cache_value(build, "CMAKE_BUILD_TYPE"),
            "cxx": run([cache_value(build, "CMAKE_CXX_COMPILER"), "--version"]).splitlines()[0],
            "nvcc": run([cache_value(build, "CMAKE_CUDA_COMPILER"), "--version"]).splitlines()[-1],
            "checks": report}, indent=1) + "\n")

        out.mkdir(parents=True, exist_ok=True)
        tmp = out / (ARCHIVE + ".tmp")
        # Every binary links the whole library, so most of each one repeats the ones before: one
        # xz stream with a window larger than the whole tree (about 300 MB uncompressed) stores
        # each repeat as a reference. Half the size of multi-threaded -6, in a third of the time.
        subprocess.run(["tar", "-C", str(stage), "-I", f"xz -T1 --lzma2=preset=1,dict={XZ_WINDOW}",
                        "-cf", str(tmp), TOP], check=True)
        os.replace(tmp, out / ARCHIVE)          # a half-written archive never replaces one
        shutil.copy2(repo / "scripts" / "gpu_run.sh", out / "gpu_run.sh")
        for extra in out.iterdir():
            if extra.name not in (ARCHIVE, "gpu_run.sh"):
                shutil.rmtree(extra) if extra.is_dir() else extra.unlink()
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    for line in report:
        print(f"gpu_pack: {line}")
    size = (out / ARCHIVE).stat().st_size
    print(f"gpu_pack: {len(items)} run items, {len(elves)} binaries; {out / ARCHIVE}: "
          f"{size / 2**20:.1f} MiB, commit {commit[:12]}"
          + (f" + {len(dirty)} uncommitted changes" if dirty else ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", type=Path, required=True, help="the built carry configuration")
    ap.add_argument("--out", type=Path, required=True, help="the folder that is carried")
    ap.add_argument("--arch", type=int, default=90, help="the GPU's SM version (default 90)")
    a = ap.parse_args()
    repo = Path(__file__).resolve().parents[2]
    try:
        pack(repo, a.build.resolve(), a.out.resolve(), a.arch)
    except (PackError, subprocess.CalledProcessError) as e:
        detail = f"\n{e.stderr}" if getattr(e, "stderr", None) else ""
        print(f"gpu_pack: {e}{detail}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
