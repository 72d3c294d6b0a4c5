"""Compare `flaxpp bench` and `bench_jax.py` results: a markdown table and two plots.

Usage (from the repository root)::

    python_compat/.venv/bin/python python_compat/bench_compare.py FLAXPP.jsonl JAX.jsonl \
        [--out-dir docs/bench]
    python3 python_compat/bench_compare.py --engines FLAXPP.jsonl

The second form compares the CPU's product engines from ``flaxpp bench`` runs made with
``FLAXPP_CPU_GEMM=blas`` and ``=onednn`` in turn, their lines in one file (each names its
engine): per configuration each engine's median step time and GEMM floor over its runs, and
their ratios; printed only. The engines are compared across processes, not within one: each
runs on its own thread runtime, and the idle threads of one slow the other down.

Rows are joined on (backend, width, depth, batch, dtype, policy); rows present in only one
file are listed on stderr and left out of the table (the plots show every row). A
configuration measured several times (``scripts/bench.sh --repeat N`` appends each run) is
reported by the median of its runs' step times and GEMM floors. On the CPU, flaxpp's rows carry
the machine's float32 GEMM peak (the faster of its engines at 1024³, measured by each run) and
the rate of the step's products (their FLOPs over the GEMM floor); the table reports that rate
over the median peak. Writes
``OUT_DIR/table.md`` (also printed to stdout), ``OUT_DIR/step_time.png`` (median step time vs
width, log y) and ``OUT_DIR/peak_memory.png`` (peak MiB vs width), one line per
(framework, policy), one panel per (backend, depth, batch, dtype) group.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from statistics import median

KEY = ("backend", "width", "depth", "batch", "dtype", "policy")
MIB = float(2 ** 20)
POLICY_ORDER = {"none": 0, "dots_with_no_batch_dims_saveable": 1, "nothing_saveable": 2}


def load(path: str) -> list[dict]:
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise SystemExit(f"{path}:{n}: not JSON: {e}")
    return rows


def merge(runs: list[dict]) -> dict:
    """One row from repeated runs of a configuration (bench.sh --repeat): the median step time
    and GEMM floor over the runs, the rates and ratios recomputed from them."""
    row = dict(runs[0])
    row["runs"] = len(runs)
    step = median([r["step_ms"] for r in runs])
    row["step_ms_min"] = min(r["step_ms"] for r in runs)
    row["step_ms_max"] = max(r["step_ms"] for r in runs)
    row["gflops"] = runs[0]["gflops"] * runs[0]["step_ms"] / step
    row["step_ms"] = step
    row["samples_per_s"] = row["batch"] * 1e3 / step
    floors = [r["gemm_floor_ms"] for r in runs if r.get("gemm_floor_ms") is not None]
    if floors:
        row["gemm_floor_ms"] = median(floors)
        row["step_over_floor"] = step / row["gemm_floor_ms"]
    if runs[0].get("product_gflops") is not None:
        row["product_gflops"] = (runs[0]["product_gflops"] * runs[0]["gemm_floor_ms"]
                                 / row["gemm_floor_ms"])
        row["machine_peak_gflops"] = median([r["machine_peak_gflops"] for r in runs])
        row["product_over_peak"] = row["product_gflops"] / row["machine_peak_gflops"]
    return row


def index(rows: list[dict]) -> dict:
    groups = defaultdict(list)
    for r in rows:
        groups[tuple(r[c] for c in KEY)].append(r)
    return {k: merge(runs) if len(runs) > 1 else runs[0] for k, runs in groups.items()}


def sort_key(k):
    backend, width, depth, batch, dtype, policy = k
    return (backend, dtype, depth, batch, width, POLICY_ORDER.get(policy, 99), policy)


def fmt(v, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


def step_time(r: dict) -> str:
    """The median step time, with the runs' min and max where there were several."""
    ms = fmt(r.get("step_ms"), ".3f")
    if r.get("step_ms_min") is None:
        return ms
    return f"{ms} ({r['step_ms_min']:.3f}-{r['step_ms_max']:.3f})"


def ops(r: dict) -> str:
    """Primitives executed per step, after fusion (before it)."""
    if r.get("ops_per_step") is None:
        return "n/a"
    before = r.get("ops_per_step_unfused")
    return f"{r['ops_per_step']}" + (f" ({before})" if before is not None else "")


def table(fpp: dict, jx: dict) -> str:
    keys = sorted(set(fpp) & set(jx), key=sort_key)
    backends = sorted({k[0] for k in keys})
    dtypes = sorted({k[4] for k in keys})
    runs = sorted({fpp[k].get("runs", 1) for k in keys} | {jx[k].get("runs", 1) for k in keys})
    over = f" over {', '.join(map(str, runs))} runs each" if runs and runs != [1] else ""
    peaks = [fpp[k]["machine_peak_gflops"] for k in keys
             if fpp[k].get("machine_peak_gflops") is not None]
    engines = sorted({fpp[k]["gemm_engine"] for k in keys if fpp[k].get("gemm_engine")})
    machine = (f" flaxpp's products on {', '.join(engines)}; the machine's float32 GEMM peak "
               f"(1024³, the faster engine): {median(peaks):.0f} GFLOP/s." if peaks else "")
    lines = [f"Backend: {', '.join(backends) or 'n/a'}; dtype: {', '.join(dtypes) or 'n/a'}. "
             f"Step times are medians{over}; ratios > 1 mean flaxpp is slower / uses more "
             f"memory.{machine}",
             "",
             "| width | depth | batch | policy | flaxpp ms (min-max) | JAX ms (min-max) "
             "| time ratio flaxpp/JAX | flaxpp step/floor | flaxpp products/peak "
             "| flaxpp ops/step (unfused) | flaxpp peak MiB | JAX peak MiB | peak ratio |",
             "| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
             "| ---: |"]
    for k in keys:
        a, b = fpp[k], jx[k]
        pa = a.get("peak_bytes")
        pb = b.get("peak_bytes")
        lines.append(
            f"| {k[1]} | {k[2]} | {k[3]} | {k[5]} | {step_time(a)} "
            f"| {step_time(b)} | {fmt(ratio(a.get('step_ms'), b.get('step_ms')), '.2f')} "
            f"| {fmt(a.get('step_over_floor'), '.2f')} | {fmt(a.get('product_over_peak'), '.2f')} "
            f"| {ops(a)} "
            f"| {fmt(None if pa is None else pa / MIB, '.2f')} "
            f"| {fmt(None if pb is None else pb / MIB, '.2f')} | {fmt(ratio(pa, pb), '.2f')} |")
    return "\n".join(lines) + "\n"


def engine_table(rows: list[dict]) -> str:
    """Each engine's medians per configuration, and the ratios of the others to the first."""
    groups = defaultdict(lambda: defaultdict(list))  # config -> engine -> rows
    order = []
    for r in rows:
        engine = r.get("gemm_engine")
        if engine is None:
            raise SystemExit("bench_compare --engines: a line without gemm_engine; write them "
                             "with FLAXPP_CPU_GEMM=blas|onednn flaxpp bench --device cpu")
        if engine not in order:
            order.append(engine)
        groups[tuple(r[c] for c in KEY)][engine].append(r)
    base, others = order[0], order[1:]
    head = ["width", "policy"] + [f"{e} step ms (min-max)" for e in order] + \
        [f"{e} floor ms" for e in order] + [f"{e} products/peak" for e in order] + \
        [f"step {e}/{base}" for e in others] + [f"floor {e}/{base}" for e in others]
    lines = ["| " + " | ".join(head) + " |", "|" + " ---: |" * len(head)]
    for k in sorted(groups, key=sort_key):
        m = {e: merge(groups[k][e]) for e in order if groups[k][e]}
        if len(m) < len(order):
            continue
        cells = [str(k[1]), k[5]] + [step_time(m[e]) for e in order] + \
            [fmt(m[e].get("gemm_floor_ms"), ".3f") for e in order] + \
            [fmt(m[e].get("product_over_peak"), ".2f") for e in order] + \
            [fmt(ratio(m[e]["step_ms"], m[base]["step_ms"]), ".2f") for e in others] + \
            [fmt(ratio(m[e].get("gemm_floor_ms"), m[base].get("gemm_floor_ms")), ".2f")
             for e in others]
        lines.append("| " + " | ".join(cells) + " |")
    runs = sorted({len(v) for g in groups.values() for v in g.values()})
    return (f"CPU product engines, one process per run; medians over "
            f"{', '.join(map(str, runs))} runs each.\n\n" + "\n".join(lines) + "\n")


def plot(rows: list[dict], field: str, scale: float, ylabel: str, title: str, path: str):
    try:
        import matplotlib
    except ImportError:  # e.g. a GPU machine's python without it: the table is what counts
        print(f"bench_compare: matplotlib is not installed; {path} not drawn", file=sys.stderr)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = defaultdict(list)  # (backend, depth, batch, dtype) -> rows
    for r in rows:
        if r.get(field) is not None:
            groups[(r["backend"], r["depth"], r["batch"], r["dtype"])].append(r)
    gkeys = sorted(groups)
    n = max(1, len(gkeys))
    fig, axes = plt.subplots(1, n, figsize=(6.5 * n, 4.8), squeeze=False)
    styles = {"flaxpp": "-", "jax": "--"}
    markers = {"none": "o", "dots_with_no_batch_dims_saveable": "s", "nothing_saveable": "^"}
    colors = {}
    for ax, gk in zip(axes[0], gkeys):
        lines = defaultdict(list)
        for r in groups[gk]:
            lines[(r["framework"], r["policy"])].append((r["width"], r[field] * scale))
        for (fw, pol) in sorted(lines, key=lambda t: (t[0], POLICY_ORDER.get(t[1], 99))):
            pts = sorted(lines[(fw, pol)])
            color = colors.setdefault(pol, f"C{len(colors)}")
            ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle=styles.get(fw, ":"),
                    marker=markers.get(pol, "x"), color=color, label=f"{fw} / {pol}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("width")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{title}\n{gk[0]}, depth {gk[1]}, batch {gk[2]}, {gk[3]}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("flaxpp", help="flaxpp bench JSON lines")
    ap.add_argument("jax", nargs="?", help="bench_jax.py JSON lines")
    ap.add_argument("--out-dir", default="docs/bench")
    ap.add_argument("--engines", action="store_true",
                    help="compare the product engines of flaxpp's lines (no JAX file)")
    args = ap.parse_args(argv)
    if args.engines:
        sys.stdout.write(engine_table(load(args.flaxpp)))
        return 0
    if args.jax is None:
        ap.error("the JAX file is needed (or --engines)")

    fpp_rows, jax_rows = load(args.flaxpp), load(args.jax)
    fpp, jx = index(fpp_rows), index(jax_rows)
    for k in sorted(set(fpp) - set(jx), key=sort_key):
        print(f"warning: only in {args.flaxpp}: {k}", file=sys.stderr)
    for k in sorted(set(jx) - set(fpp), key=sort_key):
        print(f"warning: only in {args.jax}: {k}", file=sys.stderr)

    os.makedirs(args.out_dir, exist_ok=True)
    md = table(fpp, jx)
    with open(os.path.join(args.out_dir, "table.md"), "w") as f:
        f.write(md)
    sys.stdout.write(md)

    rows = list(fpp.values()) + list(jx.values())
    plot(rows, "step_ms", 1.0, "median step time (ms)", "Training step time",
         os.path.join(args.out_dir, "step_time.png"))
    plot(rows, "peak_bytes", 1 / MIB, "peak memory (MiB)", "Peak memory",
         os.path.join(args.out_dir, "peak_memory.png"))
    print(f"wrote {args.out_dir}/table.md, step_time.png, peak_memory.png", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
