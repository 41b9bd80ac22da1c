"""Plots of a run: the scaling case's cost versus fragment count and block size.

Written next to the run's JSON (``scaling-<kind>-<mode>.png``) and referenced
from its Markdown; :func:`benchmarks.report.update_docs` copies them beside the
performance page. Needs matplotlib (the ``bench`` extra); without it no plot is
written and the run says so in its notes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["SCALING_CASE", "write_plots"]

#: The case whose rows are plotted.
SCALING_CASE = 7


def _series(rows: list[dict[str, Any]], series: str, operation: str) -> list[dict[str, Any]]:
    return [r for r in rows if r["params"].get("series") == series and r["params"].get("operation") == operation
            and r["status"] == "ok"]


def _us(timing: dict[str, Any] | None) -> float | None:
    return timing["median_s"] * 1e6 if timing and "median_s" in timing else None


def _plot_scaling(rows: list[dict[str, Any]], path: Path, title: str) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4.4))
    styles = {"gather(out=)": ("tab:blue", "o"), "redistribute": ("tab:orange", "s")}
    drawn = False
    for op, (color, marker) in styles.items():
        pts = _series(rows, "fragments", op)
        if not pts:
            continue
        drawn = True
        k = [r["params"]["fragments"] for r in pts]
        ax1.plot(k, [_us(r["dlmg"]) for r in pts], color=color, marker=marker, label=f"{op}: execution")
        ax1.plot(k, [_us(r["others"].get("planning")) for r in pts], color=color, marker=marker, ls="--",
                 label=f"{op}: planning (no cache)")
        ax1.plot(k, [_us(r["others"].get("plan cache hit")) for r in pts], color=color, marker=marker, ls=":",
                 label=f"{op}: plan cache hit")
        ax2.plot(k, [r["metrics"].get("us per fragment") for r in pts], color=color, marker=marker, label=op)
    copy = _series(rows, "fragments", "gather(out=)")
    if copy:
        ax1.plot([r["params"]["fragments"] for r in copy], [_us(r["native"]) for r in copy], color="gray",
                 label="np.copyto of the same bytes")
    ax1.set(xscale="log", yscale="log", xlabel="fragments", ylabel="microseconds per call",
            title="Time versus fragment count")
    ax1.legend(fontsize=7)
    ax2.axhline(20, color="red", lw=0.8, ls="--", label="target 20 us")
    ax2.set(xscale="log", xlabel="fragments", ylabel="time on a 64x64 tensor / fragments, us",
            title="Cost per fragment (flat = scales)")
    ax2.legend(fontsize=7)
    labels: list[str] = []
    for op, (color, marker) in styles.items():
        pts = _series(rows, "complexity", op)
        if not pts:
            continue
        drawn = True
        labels = [r["params"]["block"] for r in pts]
        x = list(range(len(pts)))
        ax3.plot(x, [_us(r["dlmg"]) for r in pts], color=color, marker=marker, label=f"{op}: execution")
        ax3.plot(x, [_us(r["others"].get("planning")) for r in pts], color=color, marker=marker, ls="--",
                 label=f"{op}: planning (no cache)")
        ax3.plot(x, [_us(r["native"]) for r in pts], color="gray", lw=0.8)
    ax3.set_xticks(range(len(labels)), labels)
    ax3.set(yscale="log", xlabel="block (grid 4x2, 8 fragments)", ylabel="microseconds per call",
            title="Time versus layout complexity")
    ax3.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    if drawn:
        fig.savefig(path, dpi=90)
    plt.close(fig)
    return drawn


def write_plots(run: dict[str, Any], out: Path) -> dict[str, str]:
    """Plot the run's scaling rows under ``out``; record and return ``{case: file name}``."""
    plots: dict[str, str] = {}
    case = next((c for c in run["cases"] if c["case"] == SCALING_CASE and c["rows"]), None)
    if case is None:
        return plots
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        run.setdefault("notes", []).append("no scaling plot: matplotlib is not installed (pip install matplotlib)")
        return plots
    out.mkdir(parents=True, exist_ok=True)
    name = f"scaling-{run['kind']}-{run['mode']}.png"
    m = run.get("machine", {})
    title = f"dlmg scaling, {run['kind'].upper()} {run['mode']} run ({m.get('cpu', '?')}, {run.get('started', '')})"
    if _plot_scaling(case["rows"], out / name, title):
        plots[str(SCALING_CASE)] = name
    run["plots"] = plots
    return plots
