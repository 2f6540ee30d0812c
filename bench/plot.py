"""PNG of the latency distributions measured by ``bench/run.py`` (P4 commit latency, P5 end-to-end latency).

Needs matplotlib (not a project dependency: ``uv pip install matplotlib`` into the venv). ``available()`` says
whether it can be imported; ``latency_cdfs`` draws one panel per benchmark, one empirical CDF per peer, with a
log-scaled latency axis and the goals as vertical lines.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def latency_cdfs(
    panels: dict[str, dict[str, list[float]]], goals: dict[str, list[float]], path: Path, title: str
) -> None:
    """``panels``: panel title -> peer -> latencies in ms; ``goals``: panel title -> goal lines in ms."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.2), squeeze=False)
    for ax, (name, peers) in zip(axes[0], panels.items(), strict=True):
        for peer, values in peers.items():
            if not values:
                continue
            ordered = sorted(values)
            n = len(ordered)
            ax.plot(ordered, [(i + 1) / n for i in range(n)], label=f"{peer} (n={n:,})")
        for g in goals.get(name, []):
            ax.axvline(g, color="grey", linestyle=":", linewidth=1)
        ax.set_xscale("log")
        ax.set_xlabel("latency, ms (log scale; dotted: goals)")
        ax.set_ylabel("fraction of samples <= x")
        ax.set_title(name)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
