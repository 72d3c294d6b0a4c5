"""Export scikit-learn's bundled digits data set to ``data/digits.csv`` for flaxpp.

Usage (from the repository root)::

    python_compat/.venv/bin/python python_compat/export_digits.py [--out data]

``sklearn.datasets.load_digits`` reads the copy that ships inside the scikit-learn wheel
(no download): 1797 samples, 64 features (an 8x8 image, integers 0..16) and a label 0..9.
The script writes

* ``<out>/digits.csv``: header ``pixel_0,...,pixel_63,label``, then one row per sample in
  scikit-learn's order, features as integers, label last;
* ``<out>/LICENSE-digits.md``: where the data comes from and under which terms, quoting the
  data set description (``DESCR``) of the installed scikit-learn.

Output is deterministic: re-running with the same scikit-learn gives the same bytes.
flaxpp reads the CSV with ``flaxpp::data::load_csv(path, {.scale = 1.0f / 16})``.
"""

from __future__ import annotations

import argparse
import os

import importlib.metadata

import numpy as np
import sklearn
from sklearn.datasets import load_digits

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LICENSE_TEMPLATE = """\
# The digits data set (`data/digits.csv`)

`data/digits.csv` is scikit-learn's bundled copy of the **Optical Recognition of Handwritten
Digits** data set of the UCI Machine Learning Repository, exported unchanged (1797 samples,
64 integer features 0..16 in row-major 8x8 order, label 0..9 last) by
`python_compat/export_digits.py` from scikit-learn {sklearn_version}
(`sklearn.datasets.load_digits`, file `sklearn/datasets/data/digits.csv.gz` of the wheel).

## Origin

* Creators: E. Alpaydin and C. Kaynak, Department of Computer Engineering, Bogazici
  University, Istanbul, Turkey; donated to the UCI Machine Learning Repository in July 1998.
* Source: https://archive.ics.uci.edu/dataset/80/optical+recognition+of+handwritten+digits
  (the address scikit-learn cites is given in its description below). scikit-learn's copy is
  the UCI *test* set (`optdigits.tes`, 1797 samples, 13 writers).
* Please cite: E. Alpaydin and C. Kaynak, "Optical Recognition of Handwritten Digits", UCI
  Machine Learning Repository, 1998; and C. Kaynak (1995), Methods of Combining Multiple
  Classifiers and Their Applications to Handwritten Digit Recognition, MSc Thesis, Bogazici
  University.

## Licence

* The data: the UCI Machine Learning Repository publishes this data set under the Creative
  Commons Attribution 4.0 International licence (CC BY 4.0,
  https://creativecommons.org/licenses/by/4.0/): it may be shared and adapted, including
  commercially, provided the creators are credited as above and changes are indicated (this
  export changes only the file format). The data set's UCI page (above) is the authority
  on these terms; check it before redistributing.
* scikit-learn, which redistributes the data inside its wheel, is licensed under the
  {sklearn_license} licence:
  "{sklearn_copyright}"
  Its description of the data set, quoted below, states no separate licence for the data.

## scikit-learn's description (`load_digits().DESCR`, scikit-learn {sklearn_version})

```rst
{descr}
```
"""


def sklearn_licence() -> dict[str, str]:
    """The licence expression and copyright line of the installed scikit-learn wheel."""
    dist = importlib.metadata.distribution("scikit-learn")
    copying = next(f for f in dist.files if f.name == "COPYING")
    copyright_line = next(line.strip() for line in copying.read_text().splitlines()
                          if line.startswith("Copyright"))
    return {"sklearn_license": dist.metadata["License-Expression"],
            "sklearn_copyright": copyright_line}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(REPO, "data"),
                        help="output folder (default: data/ of this repository)")
    args = parser.parse_args()

    digits = load_digits()
    x = np.asarray(digits.data)
    y = np.asarray(digits.target)
    # The bundled file holds integers; refuse anything else rather than round silently.
    assert x.shape == (1797, 64) and y.shape == (1797,), (x.shape, y.shape)
    assert np.array_equal(x, np.round(x)) and x.min() >= 0 and x.max() <= 16
    assert set(np.unique(y).tolist()) == set(range(10))
    xi = x.astype(np.int64)
    yi = y.astype(np.int64)

    os.makedirs(args.out, exist_ok=True)
    csv_path = os.path.join(args.out, "digits.csv")
    with open(csv_path, "w", encoding="ascii", newline="\n") as f:
        f.write(",".join([f"pixel_{i}" for i in range(64)] + ["label"]) + "\n")
        for row, label in zip(xi, yi):
            f.write(",".join(str(v) for v in row.tolist()) + f",{int(label)}\n")

    licence_path = os.path.join(args.out, "LICENSE-digits.md")
    with open(licence_path, "w", encoding="utf-8", newline="\n") as f:
        f.write(LICENSE_TEMPLATE.format(sklearn_version=sklearn.__version__,
                                        descr=digits.DESCR.strip("\n"),
                                        **sklearn_licence()))

    print(f"{csv_path}: {len(yi)} rows x {xi.shape[1]} features + label, "
          f"{os.path.getsize(csv_path)} bytes")
    print(f"{licence_path}: {os.path.getsize(licence_path)} bytes")


if __name__ == "__main__":
    main()
