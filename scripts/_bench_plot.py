"""scripts/bench --plot FILE.png: the run's cold reads as a picture (matplotlib, a bench-only
dependency): for each dataset, the daemon's CPU seconds per GB beside its floor, the floor
stacked by its parts, and the ratio the target bounds written above."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

PARTS = (("transport", "#9ecae1"), ("store reads", "#6baed6"), ("decoding", "#2171b5"))


def plot(
    names: list[str],
    median: Callable[[str, str], float | None],
    gb: float,
    bound: float,
    path: Path,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=120)
    for i, name in enumerate(names):
        parts = [median("ceiling", "daemon_cpu")]
        parts += [median("floor:" + name, k) for k in ("store_cpu", "decode_cpu")]
        ours = median(name, "daemon_cpu")
        if ours is None or None in parts:
            continue
        bottom = 0.0
        for (label, colour), part in zip(PARTS, parts, strict=True):
            ax.bar(
                i - 0.2,
                part / gb,
                0.4,
                bottom=bottom,
                color=colour,
                label=label if i == 0 else None,
            )
            bottom += part / gb
        ax.bar(i + 0.2, ours / gb, 0.4, color="#e6550d", label="zarrmount" if i == 0 else None)
        ratio = ours / sum(parts)
        ax.text(i + 0.2, ours / gb, f"{ratio:.2f}x", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("daemon CPU seconds per GB")
    ax.set_title(
        f"Cold sequential read: zarrmount against its floor (target <= {bound:g}x)", fontsize=9
    )
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
