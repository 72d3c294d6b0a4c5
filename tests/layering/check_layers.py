#!/usr/bin/env python3
"""Checks that each layer library of flaxpp calls only into itself and the libraries it links.

Usage: check_layers.py NM LIB_DIR EDGE... where each EDGE is "LAYER:DEP,DEP" (the flaxpp
libraries LAYER links, as src/CMakeLists.txt records them; "flaxpp" is the umbrella, a node
without an archive). For every layer's archive (LIB_DIR/libLAYER.a), each symbol it needs that
another flaxpp layer defines must be defined by a library it reaches through its links: a call
into a library it does not link (core calling a backend, ir calling an evaluator) is a cycle the
single umbrella target would hide. Prints the offending symbols and exits 1; prints each layer
with what it may call and exits 0 otherwise.
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


def reachable(edges, start):
    """Every library `start` links, directly or through the libraries it links."""
    seen, todo = set(), list(edges.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(edges.get(node, ()))
    return seen


def main():
    nm, lib_dir = sys.argv[1], sys.argv[2]
    edges = {}
    for edge in sys.argv[3:]:
        layer, _, deps = edge.partition(":")
        edges[layer] = [d for d in deps.split(",") if d]
    layers = [l for l in edges if l != "flaxpp"]  # the umbrella has no archive
    unknown = sorted({d for deps in edges.values() for d in deps} - set(edges))
    if unknown:
        print(f"links to libraries that record no edges: {unknown}")
        return 1
    table = {layer: symbols(nm, f"{lib_dir}/lib{layer}.a") for layer in layers}
    bad = 0
    for layer in layers:
        allowed = ({layer} | reachable(edges, layer)) - {"flaxpp"}
        if layer in reachable(edges, layer):
            print(f"{layer} links itself through {edges[layer]}: a cycle")
            bad += 1
        may_use = set().union(*(table[l][0] for l in allowed))
        for sym in sorted(table[layer][1] - may_use):
            owners = [l for l in layers if l not in allowed and sym in table[l][0]]
            if owners:
                print(f"{layer} needs {sym}, defined in {owners[0]}, which it does not link")
                bad += 1
    if bad:
        print(f"{bad} call(s) outside the links")
        return 1
    for layer in layers:
        below = sorted(reachable(edges, layer) - {"flaxpp"})
        print(f"{layer} -> {', '.join(below) if below else '(nothing)'}")
    print("every layer calls only what it links")
    return 0


if __name__ == "__main__":
    sys.exit(main())
