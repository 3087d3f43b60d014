"""The pictures of parameter sweeps, fractions of the copy bandwidth measured in the same run
(instructor/tuning.py's tuning files), drawn with matplotlib:

    draw_sweep(sweep, space, path)        `make tune`: one lab on one GPU, or None without matplotlib
    draw_devices(lab, devices, path)      `grade.py tune --draw`: the committed sweeps of one lab on
                                          several GPUs side by side, one colour scale (the handouts')

A sweep is a heat map over its tune.json's "plot" axes, each cell the best variant over the other
parameters, or without them bars, one per variant.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path

from .. import KIT_ROOT
from ..base.files import display_path
from ..grading.plot import pyplot
from .tuning import TUNE_FILE, TuneError, TuneSpace, find_lab, load_space, load_tuning, tuning_path, variant_name


def _measured(variants: list[dict]) -> list[dict]:
    return [v for v in variants if v.get("status") == "ok" and v.get("ratio") is not None]


def _panel(ax, variants: list[dict], x: str | None, y: str | None, title: str, best: dict | None,
           default: dict | None, vmin: float | None = None, vmax: float | None = None):
    """One sweep into matplotlib axes: a heat map over (x, y), colours from vmin to vmax (default
    the panel's own range), returned for a colour bar; or, without two axes, the variants as bars."""
    ok = _measured(variants)
    ax.set_title(title, fontsize=9)
    if not (x and y and x != y):
        ax.bar(range(len(ok)), [v["ratio"] for v in ok],
               color=["tab:orange" if best and v["params"] == best else "tab:blue" for v in ok])
        ax.set_xticks(range(len(ok)), [variant_name(v["params"]) for v in ok], rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("fraction of copy bandwidth")
        return None
    xs, ys = (sorted({v["params"][axis] for v in variants}) for axis in (x, y))
    cells: dict[tuple, float] = {}
    for v in ok:
        key = (v["params"][x], v["params"][y])
        cells[key] = max(cells.get(key, 0.0), v["ratio"])
    top = vmax if vmax is not None else max(cells.values(), default=1.0)
    bottom = min(vmin if vmin is not None else min(cells.values(), default=0.0), top - 1e-6)
    image = ax.imshow([[cells.get((a, b), math.nan) for a in xs] for b in ys], origin="lower", cmap="viridis",
                      vmin=bottom, vmax=top, aspect="auto")
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [str(v) for v in ys])
    ax.set(xlabel=x, ylabel=y)
    for i, b in enumerate(ys):
        for j, a in enumerate(xs):
            if (a, b) not in cells:
                ax.text(j, i, "failed\nor skipped", ha="center", va="center", color="grey", fontsize=7)
                continue
            text = f"{cells[(a, b)]:.2f}" + "".join(f"\n{name}" for name, p in (("best", best), ("default", default))
                                                    if p and (p[x], p[y]) == (a, b))
            light = cells[(a, b)] > bottom + 0.6 * (top - bottom)            # dark text on yellows
            ax.text(j, i, text, ha="center", va="center", color="black" if light else "white", fontsize=8)
    return image


def draw_sweep(sweep, space: TuneSpace, path: Path) -> Path | None:
    """The sweep of one lab on one GPU (a finished tune.LabSweep) as PNG; None without matplotlib."""
    plt = pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(6, 4.5))
    image = _panel(ax, [asdict(v) for v in sweep.variants], space.plot_x, space.plot_y,
                   f"{sweep.lab} on {sweep.device}: fraction of copy bandwidth\n(best over the other parameters)",
                   sweep.best.params if sweep.best else None, sweep.default.params if sweep.default else None)
    if image is not None:
        fig.colorbar(image, ax=ax)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def draw_devices(lab: str, devices: list[str], path: Path, kit_root: Path = KIT_ROOT) -> Path:
    """The committed sweeps of one lab on several GPUs side by side, one colour scale, as PNG.
    TuneError for a lab without tune.json or a GPU without a tuning file; UsageError (exit 2)
    without matplotlib."""
    lab_dir = find_lab(lab, kit_root)
    space = load_space(lab_dir)
    if space is None:
        raise TuneError(f"{lab_dir.name} has no {TUNE_FILE}")
    files = []
    for device in devices:
        files.append(load_tuning(lab_dir, device))
        if files[-1] is None:
            raise TuneError(f"no tuning file {display_path(tuning_path(lab_dir, device))}")
    plt = pyplot("tune --draw's pictures")
    ratios = [v["ratio"] for d in files for v in _measured(d["variants"])]
    fig, axes = plt.subplots(1, len(files), figsize=(5.2 * len(files), 4.3), squeeze=False)
    images = [_panel(ax, d["variants"], space.plot_x, space.plot_y,
                     f"{d['device']} ({d['date']})\nbest {variant_name(d['best'])}: {d['best_ratio']:.2f} x copy",
                     d["best"], d.get("default"), min(ratios, default=0.0), max(ratios, default=1.0))
              for ax, d in zip(axes[0], files)]
    if any(i is not None for i in images):
        fig.colorbar(next(i for i in images if i is not None), ax=list(axes[0]),
                     label="effective bandwidth / copy bandwidth")
    others = [p for p in space.parameters if p not in (space.plot_x, space.plot_y)]
    fig.suptitle(f"make tune, {lab_dir.name}: effective bandwidth / copy bandwidth measured in the same run"
                 + (f"\n(each cell: the best over {', '.join(others)})" if others else ""), fontsize=10, y=1.06)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return Path(path)
