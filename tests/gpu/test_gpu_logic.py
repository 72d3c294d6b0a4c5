"""The GPU bundle's decisions that need no build: how a job is judged on the GPU machine (a
skip is a failure there), how the fatbin is read, how the build machine's paths become the
bundle's, and how a changed tree is seen. Run: python3 tests/gpu/test_gpu_logic.py."""

from __future__ import annotations

import struct
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "gpu"))
from bundle import RunItem, file_sha256, tree_differences  # noqa: E402
from pack import PackError, Paths, fatbin_entries  # noqa: E402
from run import judge  # noqa: E402


class Judge(unittest.TestCase):
    def item(self, **kw) -> RunItem:
        return RunItem(name="t", command=["x"], skip_regex=["NO CUDA GPU VISIBLE"], **kw)

    def test_exit_status_decides_without_regexes(self):
        self.assertEqual(judge(self.item(), 0, "ok")[0], "PASS")
        self.assertEqual(judge(self.item(), 1, "bad"), ("FAIL", "exit status 1"))
        self.assertEqual(judge(self.item(will_fail=True), 1, "")[0], "PASS")

    def test_a_skip_is_not_a_pass_on_the_gpu_machine(self):
        self.assertEqual(judge(self.item(), 0, "NO CUDA GPU VISIBLE: ...")[0], "SKIPPED")
        self.assertEqual(judge(self.item(skip_return_code=77), 77, "")[0], "SKIPPED")

    def test_pass_and_fail_regexes_as_ctest(self):
        it = self.item(pass_regex=["grad b f32\\[4\\]"], fail_regex=["mismatch"])
        self.assertEqual(judge(it, 1, "grad b f32[4]")[0], "PASS")   # ctest ignores the status
        self.assertEqual(judge(it, 0, "grad a")[0], "FAIL")
        self.assertEqual(judge(it, 0, "grad b f32[4] mismatch")[0], "FAIL")

    def test_a_time_out(self):
        self.assertEqual(judge(self.item(), None, "")[0], "TIMEOUT")


def container(entries: list[tuple[int, int, bytes]]) -> bytes:
    """A fatbin container: its 16-byte header, then per entry a 64-byte header and payload."""
    body = b""
    for kind, arch, payload in entries:
        header = struct.pack("<HHIQ", kind, 0x101, 64, len(payload))
        header += struct.pack("<IIHHI", 0, 0, 0, 0, arch).ljust(48, b"\0")
        body += header + payload
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


class Fatbin(unittest.TestCase):
    def test_entries_of_several_containers_with_padding(self):
        section = container([(2, 90, b"\x7fELF" + b"\0" * 12), (1, 90, b"ptx\0" * 4)])
        section += b"\0" * 8 + container([(2, 80, b"\0" * 16)])
        self.assertEqual(fatbin_entries(section), [("sass", 90), ("ptx", 90), ("sass", 80)])

    def test_no_container(self):
        self.assertEqual(fatbin_entries(b"\0" * 64), [])


class Rewrite(unittest.TestCase):
    def test_build_and_tree_paths_become_the_bundles(self):
        with tempfile.TemporaryDirectory() as d:
            repo = Path(d)
            (repo / "build" / "tests").mkdir(parents=True)
            (repo / "build" / "tests" / "suite").write_text("")
            (repo / "tests" / "refs").mkdir(parents=True)
            (repo / "tests" / "refs" / "a.json").write_text("{}")
            paths = Paths(repo, repo / "build")
            self.assertEqual(paths.rewrite(f"{repo}/build/tests/suite"), "build/tests/suite")
            self.assertEqual(paths.rewrite(f"{repo}/tests/refs/a.json"), "tree/tests/refs/a.json")
            self.assertEqual(paths.rewrite("FLAXPP_DEVICE=cuda"), "FLAXPP_DEVICE=cuda")
            self.assertEqual(paths.files, {"build/tests/suite", "tree/tests/refs/a.json"})
            with self.assertRaises(PackError):
                paths.rewrite(f"{repo}/tests/refs/missing.json")


class Tree(unittest.TestCase):
    def test_a_changed_or_missing_file_is_seen(self):
        with tempfile.TemporaryDirectory() as d:
            repo = Path(d)
            (repo / "a.cpp").write_text("int a;")
            (repo / "b.cpp").write_text("int b;")
            record = repo / "record"
            record.write_text("".join(f"{file_sha256(repo / p)}  {p}\n" for p in ("a.cpp", "b.cpp")))
            self.assertEqual(tree_differences(repo, record), [])
            (repo / "a.cpp").write_text("int a = 1;")
            (repo / "b.cpp").unlink()
            self.assertEqual(tree_differences(repo, record), ["a.cpp (changed)", "b.cpp (missing)"])


if __name__ == "__main__":
    unittest.main()
