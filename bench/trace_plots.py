"""PNG pictures of the trace scenarios (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MB = 2 ** 20


def rss_over_time(curves: list[tuple[str, list]], path: Path, title: str, limit_mb: float | None = None,
                  log: bool = True) -> Path:
    """One line per (label, series); a series is ``[(t, bytes), ...]``. Log y-axis by default,
    since the RQ original and tracebus differ by orders of magnitude."""
    fig, ax = plt.subplots(figsize=(9, 4.8), dpi=110)
    for label, series in curves:
        series = [(t, v) for t, v in series if v > 0]  # 0: the process was not alive
        if not series:
            continue
        ts = [t for t, _ in series]
        ys = [v / MB for _, v in series]
        ax.plot(ts, ys, label=f"{label} (peak {max(ys):,.0f} MB)", linewidth=1.4)
    if limit_mb:
        ax.axhline(limit_mb, color="red", linestyle="--", linewidth=1, label=f"cap {limit_mb:,.0f} MB")
    if log:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds since submit")
    ax.set_ylabel("RSS of the largest process, MB")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def label_series(series: list, label: str) -> list[tuple[float, int]]:
    """``[(t, {label: bytes})]`` (an RssSampler series) -> ``[(t, bytes)]`` for one label."""
    return [(t, point.get(label, 0)) for t, point in series]


def scaling(points: dict[str, list[tuple[int, float, float]]], path: Path, title: str) -> Path:
    """Two panels, time and peak worker RSS vs CIDs; ``points[label] = [(cids, seconds, rss_mb)]``."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.5), dpi=110)
    for label, pts in points.items():
        pts = sorted(pts)
        xs = [p[0] for p in pts]
        a.plot(xs, [p[1] for p in pts], marker="o", label=label)
        b.plot(xs, [p[2] for p in pts], marker="o", label=label)
    a.set_xlabel("CIDs in the job")
    a.set_ylabel("wall time, s")
    a.set_title("time vs CIDs")
    b.set_xlabel("CIDs in the job")
    b.set_ylabel("peak RSS of the largest worker, MB")
    b.set_title("peak worker RSS vs CIDs")
    b.set_ylim(bottom=0)
    a.set_ylim(bottom=0)
    for ax in (a, b):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
