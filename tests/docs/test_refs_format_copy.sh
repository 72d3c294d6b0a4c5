#!/usr/bin/env bash
# docs/refs-format.md is a verbatim copy of the reference-case contract, ../shared/docs/
# refs-format.md (relative to the repository root). Where ../shared exists the two must be
# identical; elsewhere (a clone on its own) the test says it skipped.
# Usage: test_refs_format_copy.sh REPOSITORY_ROOT
set -u
root=$1
shared=$root/../shared/docs/refs-format.md
copy=$root/docs/refs-format.md
if [ ! -f "$shared" ]; then
  echo "SKIPPED: $shared does not exist (no ../shared beside the repository); nothing to compare"
  exit 77
fi
if cmp -s "$shared" "$copy"; then
  echo "docs/refs-format.md is a verbatim copy of ../shared/docs/refs-format.md"
  exit 0
fi
echo "FAIL docs/refs-format.md differs from ../shared/docs/refs-format.md; refresh the copy:"
echo "  cp ../shared/docs/refs-format.md docs/refs-format.md"
diff -u "$copy" "$shared" | head -40
exit 1
