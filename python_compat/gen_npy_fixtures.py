"""Write the NumPy-made .npy fixtures that tests/data/test_dataset.cpp reads.

Usage (from the repository root)::

    python_compat/.venv/bin/python python_compat/gen_npy_fixtures.py [--out tests/data/fixtures]

Each file is written by NumPy itself (``np.save`` / ``np.lib.format.write_array``), so the
tests check flaxpp's reader against the real format rather than against flaxpp's own writer.
The values are spelled out here and again in the test; change both together. Output is
deterministic (same NumPy, same bytes).
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from sklearn.datasets import load_digits

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fixtures() -> dict[str, np.ndarray]:
    digits = load_digits()
    return {
        # One per supported dtype, in the shapes numpy users produce.
        "f4_2x3.npy": np.array([[-1.5, 0.0, 0.25], [1e-3, 3.4028235e38, -0.0]], dtype="<f4"),
        "f8_scalar.npy": np.array(2.718281828459045, dtype="<f8"),  # 0-d
        "i4_2x1x3.npy": (np.arange(6, dtype="<i4") - 3).reshape(2, 1, 3),
        "u4_3.npy": np.array([0, 1, 4294967295], dtype="<u4"),
        "b1_2x2x2.npy": np.array([[[True, False], [False, True]], [[True, True], [False, False]]]),
        "i8_6.npy": np.array([0, 9, 3, 7, 2147483647, -2147483648], dtype="<i8"),
        "f4_0x3.npy": np.zeros((0, 3), dtype="<f4"),
        # The first 5 digits as numpy's defaults give them: float64 features, int64 labels.
        "digits_x5.npy": np.asarray(digits.data[:5], dtype="<f8"),
        "digits_y5.npy": np.asarray(digits.target[:5], dtype="<i8"),
        # Files flaxpp must refuse with a clear message.
        "i8_overflow.npy": np.array([1, 2**31], dtype="<i8"),
        "f4_fortran.npy": np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)),
        "f4_bigendian.npy": np.arange(3, dtype=">f4"),
        "f2_3.npy": np.arange(3, dtype="<f2"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(REPO, "tests", "data", "fixtures"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, a in fixtures().items():
        path = os.path.join(args.out, name)
        np.save(path, a, allow_pickle=False)
        print(f"{path}: {a.dtype.str}{list(a.shape)}, {os.path.getsize(path)} bytes")
    # Format version 2.0 (4-byte header length), which np.save only picks for huge headers.
    path = os.path.join(args.out, "f4_2x3_v2.npy")
    with open(path, "wb") as f:
        np.lib.format.write_array(f, fixtures()["f4_2x3.npy"], version=(2, 0), allow_pickle=False)
    print(f"{path}: format 2.0, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
