"""The GPU bundle's contract, shared by its packer (pack.py, on a CPU machine with the CUDA
toolkit) and its runner (run.py, on the GPU machine): the layout of the unpacked bundle, the
run list, the record of the tree it was built from, and the loader path.

Layout of the archive (one top folder, ``bundle/``)::

    bundle/build/...      the carried binaries, at their paths in the build folder
    bundle/tree/...       the source-tree files the runs read (reference files, benchmark
                          scripts), at their paths in the repository
    bundle/lib/           the non-CUDA shared libraries the binaries load (OpenBLAS and its
                          Fortran runtimes): the loader path's first entry
    bundle/gpu/           this module and run.py
    bundle/runlist.json   what runs, derived from ctest's own test list (see RunItem)
    bundle/built.json     the commit it was built from, the build's flags, the toolchain
    bundle/tree.sha256    "HASH  PATH" for every file of the tree it was built from

Nothing here needs a GPU, JAX or binutils: only the Python standard library.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

ARCHIVE = "bundle.tar.xz"
TOP = "bundle"

# Shared libraries the GPU machine provides itself, so the bundle never carries them: glibc,
# the C++ runtime (carrying Debian's would raise the bundle's glibc floor to 2.36), and CUDA's
# own libraries and driver (the toolkit's, or the cuDNN and NCCL Python wheels').
PROVIDED = re.compile(
    r"^(ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libutil|libresolv|libstdc\+\+|libgcc_s"
    r"|libcuda|libcudart|libcublas|libcublasLt|libcudnn(_[a-z_]+)?|libnccl|libnvrtc(-builtins)?"
    r"|libnvJitLink)\.so(\.[0-9]+)*$")


@dataclass
class RunItem:
    """One command of the run list: a ctest job, or one the runner adds itself.

    ``command`` and ``env`` hold paths relative to the unpacked bundle's root, the folder the
    command runs in. A job passes as ctest would judge it (exit status, PASS/FAIL regular
    expressions) except that on the GPU machine ctest's "skipped" (SKIP_REGULAR_EXPRESSION or
    SKIP_RETURN_CODE) is a failure: a CUDA job that skips did not see the GPU.
    """

    name: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    phase: str = "A"           # A: concurrently on the GPU; B: alone, for timings
    timeout_s: int = 300
    pass_regex: list[str] = field(default_factory=list)
    fail_regex: list[str] = field(default_factory=list)
    skip_regex: list[str] = field(default_factory=list)
    skip_return_code: int | None = None
    will_fail: bool = False
    doctest: bool = False      # a doctest suite: takes -tc=/-tce= filters, lists its cases


def save_runlist(path: Path, items: list[RunItem]) -> None:
    path.write_text(json.dumps([asdict(i) for i in items], indent=1) + "\n")


def load_runlist(path: Path) -> list[RunItem]:
    return [RunItem(**d) for d in json.loads(path.read_text())]


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tree_files(repo: Path) -> list[str]:
    """The files the device tool copies: tracked, and untracked but not ignored."""
    out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others",
                          "--exclude-standard"], check=True, capture_output=True).stdout
    return sorted({p for p in out.decode().split("\0") if p and (repo / p).is_file()})


def write_tree_record(repo: Path, dest: Path) -> None:
    lines = [f"{file_sha256(repo / p)}  {p}\n" for p in tree_files(repo)]
    dest.write_text("".join(lines))


def tree_differences(repo: Path, record: Path) -> list[str]:
    """The recorded files that are missing or changed in ``repo``: empty when the bundle was
    built from this tree. (A file added since is seen through the CMakeLists.txt that must
    name it.)"""
    changed = []
    for line in record.read_text().splitlines():
        digest, path = line.split("  ", 1)
        f = repo / path
        if not f.is_file():
            changed.append(f"{path} (missing)")
        elif file_sha256(f) != digest:
            changed.append(f"{path} (changed)")
    return changed


def python_package_lib(module: str) -> str | None:
    """``<package>/lib`` of an installed NVIDIA wheel (nvidia.cudnn, nvidia.nccl), if any."""
    code = f"import {module} as m; print(list(m.__path__)[0])"
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lib = Path(out.stdout.strip()) / "lib" if out.returncode == 0 and out.stdout.strip() else None
    return str(lib) if lib and lib.is_dir() else None


def loader_path(root: Path) -> list[str]:
    """The folders the carried binaries load their libraries from, in order: the bundle's own
    lib/, the cuDNN and NCCL wheels' lib/ (cuDNN dlopens its sub-libraries and NVRTC through the
    global search path, so RUNPATH cannot do it), then the CUDA toolkit's library folders."""
    dirs = [str(root / "lib")]
    for module in ("nvidia.cudnn", "nvidia.nccl", "nvidia.cu13", "nvidia.cuda_nvrtc"):
        lib = python_package_lib(module)
        if lib:
            dirs.append(lib)
    for d in ("/usr/local/cuda/lib64", "/usr/local/cuda/lib",
              "/usr/local/cuda/targets/x86_64-linux/lib"):
        if os.path.isdir(d) and os.path.realpath(d) not in map(os.path.realpath, dirs):
            dirs.append(d)
    return dirs


def is_elf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"
