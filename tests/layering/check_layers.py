#!/usr/bin/env python3
"""Checks that each layer library of flaxpp calls only into itself and the layers below it.

Usage: check_layers.py NM LIB_DIR LAYER... (lowest first). For every layer's archive
(LIB_DIR/libLAYER.a), each symbol it needs that some flaxpp layer defines must be defined by
that layer or a lower one: a call into a higher layer (core calling a backend, ir calling an
evaluator) is a cycle the single umbrella target would hide. Prints the offending symbols and
exits 1; prints the layers checked and exits 0 otherwise.
"""
import subprocess
import sys


def symbols(nm, archive):
    out = subprocess.run([nm, "--defined-only", "-g", "-C", archive], capture_output=True,
                         text=True, check=True).stdout
    defined = {line.split(" ", 2)[2] for line in out.splitlines()
               if line.count(" ") >= 2 and line.split(" ", 2)[1] not in ("U", "w", "v")}
    out = subprocess.run([nm, "--undefined-only", "-g", "-C", archive], capture_output=True,
                         text=True, check=True).stdout
    undefined = {line.split("U ", 1)[1] for line in out.splitlines() if "U " in line}
    return defined, undefined


def main():
    nm, lib_dir, layers = sys.argv[1], sys.argv[2], sys.argv[3:]
    table = {layer: symbols(nm, f"{lib_dir}/lib{layer}.a") for layer in layers}
    bad = 0
    for i, layer in enumerate(layers):
        below = set().union(*(table[l][0] for l in layers[: i + 1]))
        for sym in sorted(table[layer][1] - below):
            owners = [l for l in layers[i + 1:] if sym in table[l][0]]
            if owners:
                print(f"{layer} needs {sym}, defined in the higher layer {owners[0]}")
                bad += 1
    if bad:
        print(f"{bad} call(s) into higher layers")
        return 1
    print("layers call only downwards: " + " < ".join(layers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
