"""Writes data/genesis.txt: the Book of Genesis (King James Version) as plain prose, one
paragraph per chapter, from Debian's bible-kjv-text package (read with its `bible` program:
``apt-get install bible-kjv``). See data/LICENSE-genesis.md.

Run: ``python3 python_compat/export_genesis.py`` (no third-party Python packages needed).
"""

import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(HERE), "data", "genesis.txt")


def main() -> None:
    raw = subprocess.run(["bible", "-l1000", "Genesis 1:1-50:26"], check=True,
                         capture_output=True, text=True).stdout.splitlines()
    chapters, verses = [], []
    for line in raw:
        if re.fullmatch(r"Genesis \d+", line.strip()):  # a chapter heading
            if verses:
                chapters.append(" ".join(verses))
                verses = []
        elif m := re.fullmatch(r"\s*\d+ (.*)", line):    # "  12 And God said, ..."
            verses.append(m.group(1).strip())
        elif line.strip():                               # a verse's wrapped remainder
            verses.append(line.strip())
    if verses:
        chapters.append(" ".join(verses))
    assert len(chapters) == 50, len(chapters)
    with open(OUT, "w", encoding="ascii") as f:
        f.write("\n\n".join(chapters) + "\n")
    print(f"{OUT}: {len(chapters)} chapters, {os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()
