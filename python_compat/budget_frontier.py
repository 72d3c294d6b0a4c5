"""The remat frontier from `flaxpp bench --budget-sweep` lines: a markdown table per model
(step time against measured peak, every named policy and every budget) and one plot per model.

    build/src/flaxpp bench --budget-sweep --out budget.jsonl [--steps N] [--points P]
    python_compat/budget_frontier.py budget.jsonl budget2.jsonl ... [--out-dir docs/bench]

Several files (runs) are pooled: each configuration's step time is the median over the runs'
medians, and the table says how many runs it pools. Standard library only, but the plot needs
matplotlib (python_compat's venv has it); without it the table is still written.
"""
import argparse
import json
import os
import statistics
import sys
from collections import defaultdict

MODELS = {"mlp": "MLP (width 1024, depth 4, batch 128, SGD; one region)",
          "lm8": "LM with 8 scanned Blocks (width 64, 64 tokens, batch 32, SGD; one region)"}

# How a choice of value classes starts (flaxpp/transforms/remat_plan.hpp).
VALUE_CLASSES = "lambda prim, *avals, **_: (prim.name, tuple(a.shape for a in avals)) in {"
CLASS_START = "('"  # each class is ('primitive', (shapes...))


def key(r: dict):
    return (r["model"], r["policy"], r.get("budget_bytes", 0))


def pooled(paths: list[str]) -> list[dict]:
    groups = defaultdict(list)
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    groups[key(r)].append(r)
    out = []
    for rows in groups.values():
        r = dict(rows[0])
        r["step_ms"] = statistics.median(x["step_ms"] for x in rows)
        r["runs"] = len(rows)
        r["peak_bytes"] = max(x["peak_bytes"] for x in rows)
        out.append(r)
    return out


def mib(b: int) -> str:
    return f"{b / 2**20:.2f}"


def short(chosen: list[str], notes: list[str]) -> str:
    """A region's choice for the table: a named policy as it is, a longer lambda as a note."""
    out = []
    for c in sorted(set(chosen)):
        if len(c) <= 80:
            out.append(c)
            continue
        if c not in notes:
            notes.append(c)
        what = f"{c.count(CLASS_START)} classes" if c.startswith(VALUE_CLASSES) else "lambda"
        out.append(f"[{notes.index(c) + 1}] ({what})")
    return ", ".join(out) or "(no region)"


def table(rows: list[dict], model: str) -> str:
    named = [r for r in rows if r["model"] == model and r["policy"] != "budget"]
    budgets = sorted((r for r in rows if r["model"] == model and r["policy"] == "budget"),
                     key=lambda r: r["budget_bytes"])
    lines = [f"**{MODELS.get(model, model)}**", "",
             "| step | budget MiB | at the peak of | chosen | recomputed GFLOP | modeled ms | "
             "step ms | measured peak MiB | planned peak MiB | runs |",
             "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in named:
        modeled = f"{r['modeled_ms']:.1f}" if "modeled_ms" in r else ""
        lines.append(f"| `{r['policy']}` | | | | | {modeled} | {r['step_ms']:.1f} | "
                     f"{mib(r['peak_bytes'])} | {mib(r['planned_peak_bytes'])} | {r['runs']} |")
    notes: list[str] = []
    for r in budgets:
        at = ", ".join(f"`{n}`" for n in r.get("at_peak_of", []))
        modeled = f"{r['modeled_ms']:.1f}" if "modeled_ms" in r else ""
        lines.append(f"| budget | {mib(r['budget_bytes'])} | {at} | {short(r['chosen'], notes)} | "
                     f"{r['recompute_flops'] / 1e9:.3f} | {modeled} | {r['step_ms']:.1f} | "
                     f"{mib(r['peak_bytes'])} | {mib(r['planned_peak_bytes'])} | {r['runs']} |")
    lines.append("")
    for i, n in enumerate(notes):
        lines.append(f"[{i + 1}] `{n}`")
        lines.append("")
    return "\n".join(lines)


def at_named_peaks(paths: list[str], model: str) -> str:
    """Per named policy whose own peak was a budget: the policy's step time over the budget's
    choice's, run by run (both in the same run), and the median of those ratios."""
    ratios = defaultdict(list)
    ms = defaultdict(lambda: ([], []))
    for path in paths:
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        named = {r["policy"]: r for r in rows if r["model"] == model and r["policy"] != "budget"}
        for r in rows:
            if r["model"] != model or r["policy"] != "budget":
                continue
            for n in r.get("at_peak_of", []):
                if n not in named:
                    continue  # the run lacks that policy's own line
                ratios[n].append(named[n]["step_ms"] / r["step_ms"])
                ms[n][0].append(named[n]["step_ms"])
                ms[n][1].append(r["step_ms"])
    if not ratios:
        return ""
    lines = ["| named policy | its step ms | the budget's step ms at its peak | "
             "policy / budget, per run | median |",
             "| --- | ---: | ---: | --- | ---: |"]
    for n, rs in ratios.items():
        lines.append(f"| `{n}` | {statistics.median(ms[n][0]):.1f} | "
                     f"{statistics.median(ms[n][1]):.1f} | "
                     f"{', '.join(f'{x:.2f}' for x in rs)} | {statistics.median(rs):.2f} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], model: str, path: str) -> None:
    try:
        import matplotlib
    except ImportError:
        print(f"budget_frontier: matplotlib is not installed; {path} not drawn", file=sys.stderr)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    named = [r for r in rows if r["model"] == model and r["policy"] != "budget"]
    for i, r in enumerate(named):
        ax.scatter(r["peak_bytes"] / 2**20, r["step_ms"], marker="s", s=60, color=f"C{i}",
                   label=r["policy"], zorder=3)
    budgets = sorted((r for r in rows if r["model"] == model and r["policy"] == "budget"),
                     key=lambda r: r["budget_bytes"])
    if budgets:
        ax.plot([r["peak_bytes"] / 2**20 for r in budgets], [r["step_ms"] for r in budgets],
                "k.-", label="memory_budget (measured peak)", zorder=2)
        ax.plot([r["budget_bytes"] / 2**20 for r in budgets], [r["step_ms"] for r in budgets],
                "x", color="gray", label="the budgets asked for", zorder=1)
    ax.ticklabel_format(useOffset=False)
    ax.set_xlabel("peak MiB (measured by the allocator)")
    ax.set_ylabel("step ms (median)")
    ax.set_title(MODELS.get(model, model), fontsize=9)
    ax.legend(fontsize=7, loc="center right")
    ax.grid(True, alpha=0.3)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="flaxpp bench --budget-sweep JSON lines")
    ap.add_argument("--out-dir", default="docs/bench")
    args = ap.parse_args(argv)
    rows = pooled(args.runs)
    for model in sorted({r["model"] for r in rows}):
        sys.stdout.write(table(rows, model) + "\n")
        sys.stdout.write(at_named_peaks(args.runs, model) + "\n")
        plot(rows, model, os.path.join(args.out_dir, f"budget_frontier_{model}.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
