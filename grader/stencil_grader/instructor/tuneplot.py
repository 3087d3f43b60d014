"""The pictures of parameter sweeps (`make tune`, `grade.py tune --draw`): one lab's sweep on one
GPU as a heat map over its tune.json's "plot" axes (each cell the best variant over the other
parameters), or as bars, one per variant; and the committed sweeps of one lab on several GPUs side
by side, with one colour scale (the handouts' picture).  matplotlib is optional: without it
draw_sweep draws nothing and draw_devices says so.  The figures are fractions of the copy
bandwidth measured in the same run (instructor/tuning.py's tuning files)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from .. import KIT_ROOT
from ..base.files import display_path
from .tuning import TUNE_FILE, TuneError, TuneSpace, find_lab, load_space, load_tuning, tuning_path, variant_name


def _grid(variants: list[dict], x: str, y: str) -> tuple[list[int], list[int], dict]:
    """Heat-map cells: the best ratio over the other parameters per (x, y) value pair."""
    xs = sorted({v["params"][x] for v in variants})
    ys = sorted({v["params"][y] for v in variants})
    cells: dict[tuple[int, int], float] = {}
    for v in variants:
        if v.get("status") == "ok" and v.get("ratio") is not None:
            key = (v["params"][x], v["params"][y])
            cells[key] = max(cells.get(key, 0.0), v["ratio"])
    return xs, ys, cells


def _draw_panel(ax, variants: list[dict], x: str | None, y: str | None, title: str,
                best: dict | None, default: dict | None, vmin: float | None = None,
                vmax: float | None = None):
    """One sweep into matplotlib axes: a heat map over (x, y) (colours from vmin to vmax,
    default the panel's own range), or the ratio of every variant as bars."""
    if x and y and x != y:
        xs, ys, cells = _grid(variants, x, y)
        import math
        data = [[cells.get((xv, yv), math.nan) for xv in xs] for yv in ys]
        top = vmax if vmax is not None else max(cells.values(), default=1.0)
        bottom = vmin if vmin is not None else min(cells.values(), default=0.0)
        bottom = min(bottom, top - 1e-6)
        image = ax.imshow(data, origin="lower", cmap="viridis", vmin=bottom, vmax=top, aspect="auto")
        ax.set_xticks(range(len(xs)), [str(v) for v in xs])
        ax.set_yticks(range(len(ys)), [str(v) for v in ys])
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        for i, yv in enumerate(ys):
            for j, xv in enumerate(xs):
                if (xv, yv) in cells:
                    text = f"{cells[(xv, yv)]:.2f}"
                    if best and (best[x], best[y]) == (xv, yv):
                        text += "\nbest"
                    if default and (default[x], default[y]) == (xv, yv):
                        text += "\ndefault"
                    light = cells[(xv, yv)] > bottom + 0.6 * (top - bottom)   # dark text on yellows
                    ax.text(j, i, text, ha="center", va="center", color="black" if light else "white",
                            fontsize=8)
                else:
                    ax.text(j, i, "failed\nor skipped", ha="center", va="center", color="grey", fontsize=7)
        ax.set_title(title, fontsize=9)
        return image
    ok = [v for v in variants if v.get("status") == "ok" and v.get("ratio") is not None]
    labels = [variant_name(v["params"]) for v in ok]
    ax.bar(range(len(ok)), [v["ratio"] for v in ok],
           color=["tab:orange" if best and v["params"] == best else "tab:blue" for v in ok])
    ax.set_xticks(range(len(ok)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("fraction of copy bandwidth")
    ax.set_title(title, fontsize=9)
    return None


def draw_sweep(sweep, space: TuneSpace, path: Path) -> Path | None:
    """The sweep of one lab on one GPU as PNG (heat map over tune.json's plot axes, else
    bars); None when matplotlib is not installed.  sweep: a finished tune.LabSweep (lab, device,
    variants, best, default)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    variants = [asdict(v) for v in sweep.variants]
    fig, ax = plt.subplots(figsize=(6, 4.5))
    image = _draw_panel(ax, variants, space.plot_x, space.plot_y,
                        f"{sweep.lab} on {sweep.device}: fraction of copy bandwidth\n"
                        f"(best over the other parameters)",
                        sweep.best.params if sweep.best else None,
                        sweep.default.params if sweep.default else None)
    if image is not None:
        fig.colorbar(image, ax=ax)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def draw_devices(lab: str, devices: list[str], path: Path, kit_root: Path = KIT_ROOT) -> Path:
    """The committed sweeps of one lab on several GPUs side by side (the handouts' picture),
    with one colour scale.  Raises TuneError for a GPU without a tuning file, or when
    matplotlib is not installed."""
    lab_dir = find_lab(lab, kit_root)
    space = load_space(lab_dir)
    if space is None:
        raise TuneError(f"{lab_dir.name} has no {TUNE_FILE}")
    files = []
    for device in devices:
        data = load_tuning(lab_dir, device)
        if data is None:
            raise TuneError(f"no tuning file {display_path(tuning_path(lab_dir, device))}")
        files.append(data)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise TuneError("drawing needs matplotlib (pip install matplotlib)") from None
    ratios = [v["ratio"] for d in files for v in d["variants"]
              if v.get("status") == "ok" and v.get("ratio") is not None]
    vmin, vmax = min(ratios, default=0.0), max(ratios, default=1.0)
    fig, axes = plt.subplots(1, len(files), figsize=(5.2 * len(files), 4.3), squeeze=False)
    image = None
    for ax, data in zip(axes[0], files):
        title = (f"{data['device']} ({data['date']})\nbest {variant_name(data['best'])}: "
                 f"{data['best_ratio']:.2f} x copy")
        image = _draw_panel(ax, data["variants"], space.plot_x, space.plot_y, title,
                            data["best"], data.get("default"), vmin, vmax) or image
    if image is not None:
        fig.colorbar(image, ax=list(axes[0]), label="effective bandwidth / copy bandwidth")
    others = [p for p in space.parameters if p not in (space.plot_x, space.plot_y)]
    fig.suptitle(f"make tune, {lab_dir.name}: effective bandwidth / copy bandwidth measured in the same run"
                 + (f"\n(each cell: the best over {', '.join(others)})" if others else ""), fontsize=10, y=1.06)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
