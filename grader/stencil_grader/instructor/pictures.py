"""The kit's raster pictures (matplotlib; the report page: headless Chromium): the tour's path and
roofline (draw: `grade.py tour --plot`, and draw_tour from handouts/data/SLUG/tour.json for `grade.py
pictures`), report-page.png (`pictures --report-page`: the recorded grading of tests/python/data/html/
under today's targets, retarget), and the sweeps of `make tune` as heat maps (draw_sweep, and
draw_devices for `grade.py tune --draw`).  The handouts' pictures are drawn from what was recorded,
never from a new measurement.
"""

from __future__ import annotations

import copy
import math
import os
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from .. import KIT_ROOT
from ..base import labspec
from ..base.files import display_path, read_json
from ..grading import html, plot, score
from .records import DATA_DIR, load_recordings
from . import roofs, tour, tune

IMG_DIR = KIT_ROOT / "handouts" / "img"
#: The recorded grading the index's report-page.png shows (tests/python/data/html/README.md).
REPORT = KIT_ROOT / "tests" / "python" / "data" / "html" / "report-02-shared-tiling--diag_bank_conflicts.json"
PROFILE = REPORT.with_name(REPORT.name.replace("report-", "profile-"))
#: The page's width in the screenshot (CSS pixels), as a reader's browser window.
PAGE_WIDTH = 1100


class PictureError(RuntimeError):
    """A picture cannot be made here: no recording, no SM count or clock, no Chromium; the message says which."""


def draw_tour(slug: str, data_dir: Path = DATA_DIR, img_dir: Path = IMG_DIR) -> list[str]:
    """path-SLUG.png and roofline-SLUG.png from the recorded tour of SLUG; one line per picture.
    PictureError: no SM count or clock; RecordError: no recording; UsageError: no matplotlib."""
    record = load_recordings(data_dir).get(slug, "tour").data
    device = record["device"]
    plot.pyplot("the handouts' pictures")
    if not device.get("sm_count") or not device.get("sm_clock_max_mhz"):
        raise PictureError(f"{slug}/tour.json records no SM count or SM clock: no roofline can be drawn")
    title = f"{device['name']}: make tour of {record['date']}"
    return draw(tour.recorded_rows(record), device["name"], int(device["sm_count"]), Path(img_dir) / f"path-{slug}.png",
                clock_mhz=float(device["sm_clock_max_mhz"]), roofline_path=Path(img_dir) / f"roofline-{slug}.png",
                title=title, params_of=recorded_parameters(device["name"]),
                shared_bytes_per_clock=roofs.recorded_bytes_per_clock(slug, data_dir=data_dir))


def roofline_points(rows: list[tour.TourRow]) -> list[plot.RooflinePoint]:
    """Each row at its arithmetic intensity (its lab's kind: FLOP per cell, grader/kinds.json, times
    the sweeps fused per pass, over the compulsory bytes per cell) and its useful GFLOP/s."""
    return [plot.point_from_gbps(r.kernel, r.gbps, labspec.load(KIT_ROOT / "labs" / r.lab / "lab.json")
                                 .kind.launchers[0], r.sweeps_per_pass, ratio=r.ratio) for r in rows]


#: Bar colours of the tour's parts, in order (2D, 3D, lab 8's designs).
PART_COLOURS = ("#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd")


def path_bars(rows: Iterable, device: str, path: str | Path) -> bool:
    """The path as horizontal bars of effective / copy bandwidth (PNG), first row on top, a line at
    1.0; rows: (label, ratio) pairs, or objects with kernel, ratio and part (tour.TourRow), coloured
    by part.  ValueError on a ratio that is negative or not finite; False, no file, without matplotlib."""
    rows = [(r.kernel, r.ratio, getattr(r, "part", "") or "") if hasattr(r, "ratio") else (*r, "") for r in rows]
    for label, ratio, _ in rows:
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 <= ratio < math.inf:
            raise ValueError(f"ratio of {label!r} must be a finite number >= 0, got {ratio!r}")
    if (plt := plot.pyplot()) is None:
        return False
    labels, ratios, parts = zip(*rows[::-1]) if rows else ((), (), ())
    names = list(dict.fromkeys(parts[::-1]))              # the parts in the rows' order
    fig, ax = plt.subplots(figsize=(8, 0.9 + 0.4 * max(1, len(rows))))
    bars = ax.barh(range(len(rows)), ratios, color=[PART_COLOURS[names.index(p) % 4] for p in parts])
    ax.set_yticks(range(len(rows)), labels)
    for y, r in enumerate(ratios):
        ax.annotate(f"{r:.2f}", (r, y), textcoords="offset points", xytext=(4, 0), fontsize=8, va="center",
                    bbox=dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none"), zorder=3)
    ax.axvline(1.0, linestyle="--", linewidth=1, color="black", zorder=2)
    ax.set_xlim(0, max(list(ratios) + [1.0]) * 1.12)
    if len(names) > 1 and all(names):
        ax.legend([bars[parts.index(n)] for n in names], names, loc="lower right", fontsize=8, frameon=False)
    ax.set(xlabel="effective bandwidth / copy bandwidth (1.0: the copy)", title=device)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return True


def draw(rows: list[tour.TourRow], device: str, sm_count: int | None, path: Path,
         clock_mhz: float | None = None, roofline_path: Path | None = None, title: str | None = None,
         params_of=None, shared_bytes_per_clock: float | None = None) -> list[str]:
    """The path as bars (path) and the roofline with every row (roofline_path, default path's stem +
    "-roofline.png"); one line per picture, written or why not.  Defaults: clock_mhz nvidia-smi's maximum
    SM clock, title the device, params_of(lab, impl) (for roofs.roofline_ceilings) built_parameters;
    shared_bytes_per_clock: the measured shared-memory roof (roofs.roofline_ceilings)."""
    path = Path(path)
    if not path_bars(rows, title or device, path):
        return ["(no plots: matplotlib is not installed)"]
    said = [f"path: {path}"]
    clock = clock_mhz or plot.max_sm_clock_mhz()
    if not sm_count or not clock:
        return said + ["(no roofline: the SM count or the SM clock of this GPU is unknown)"]
    peak = plot.peak_fp32_gflops(sm_count, clock)
    copy = statistics.median(r.copy_gbps for r in rows)
    roof = Path(roofline_path) if roofline_path else path.with_name(path.stem + "-roofline.png")
    ceilings, notes = roofs.roofline_ceilings(rows, sm_count, clock, params_of or tour.built_parameters,
                                              shared_bytes_per_clock)
    plot.roofline(roofline_points(rows), device, copy, peak, roof, ceilings,
                  title=f"Roofline: {title}" if title else None)
    return said + [f"roofline: {roof} (peak fp32 {peak / 1e3:.1f} TFLOP/s estimated from {sm_count} SMs "
                   f"at {clock:.0f} MHz; copy {copy:.0f} GB/s)"] \
        + [f"  ceiling: {c.label}, {c.gflops / 1e3:.1f} TFLOP/s ({c.how})" for c in ceilings] + notes


def recorded_parameters(device: str):
    """params_of(lab, impl) for tour.draw: a reference's TUNE_ parameters as lab.mk builds it on `device`;
    None (unknown) for any other row or where they cannot be read."""
    def params_of(lab: str, impl: str) -> dict | None:
        if impl != "reference":
            return None
        lab_dir = KIT_ROOT / "labs" / lab
        try:
            return tune.source_defaults(tune.reference_source(lab_dir)) | tune.tuned_parameters(lab_dir, device)
        except (tune.TuneError, OSError):
            return None
    return params_of


def retarget(report: dict, kit_root: Path = KIT_ROOT) -> dict:
    """The report with its targets entry as lab.json holds it now; PictureError when the recorded ratio
    would earn other performance points under them (a page must not show points it did not get)."""
    out = copy.deepcopy(report)
    perf = out.get("performance") or {}
    target = perf.get("target") or {}
    spec = labspec.load(Path(kit_root) / "labs" / str(report["lab"]) / "lab.json")
    entry = spec.targets.get(target.get("table"))
    if entry is None:
        raise PictureError(f"{report['lab']}: lab.json has no targets table {target.get('table')!r}")
    target.update(floor=entry.floor, target=entry.target, calibrated=entry.calibrated,
                  reference_ratio=entry.reference_ratio)
    ratio = perf.get("ratio")
    if ratio is not None and perf.get("max_points"):
        points = score.performance_points(perf["max_points"], ratio, entry.floor, entry.target)
        if points != round(perf.get("points", 0.0), 2):
            raise PictureError(f"{report['lab']}: under today's targets the recorded ratio {ratio:.3f} would earn "
                               f"{points:.2f} performance points, not the recorded "
                               f"{perf.get('points')}: record a new grading instead")
        if perf.get("verdict") in score.CORRECT:
            perf["message"] = score.performance_message(ratio, entry.floor, entry.target, target["table"])
    return out


def recorded_peak(report: dict, data_dir: Path = DATA_DIR) -> tuple[int, float, str]:
    """(SM count, maximum SM clock in MHz, the page's note saying where each came from) for the roofline
    of a recorded grading: the count its bench recorded, the clock (a grading records none) from a
    recorded tour of the same GPU.  PictureError when neither holds one (RecordError: a broken record)."""
    bench = (report.get("performance") or {}).get("bench") or {}
    name = bench.get("device") or ((report.get("gpu") or {}).get("device") or {}).get("name")
    tours = [(slug, r.data["device"]) for (slug, kind), r in sorted(load_recordings(data_dir).records.items())
             if kind == "tour" and r.data["device"].get("name") == name and r.data["device"].get("sm_clock_max_mhz")]
    if not tours:
        raise PictureError(f"no recorded tour of {name!r} under {data_dir} gives its SM clock, which the "
                           "roofline's peak needs and a grading does not record")
    slug, device = tours[0]
    sm_count = bench.get("sm_count") or device.get("sm_count")
    if not sm_count:
        raise PictureError(f"neither the recorded grading nor {slug}/tour.json records {name}'s SM count")
    clock = float(device["sm_clock_max_mhz"])
    source = "the grading" if bench.get("sm_count") else f"{slug}/tour.json"
    return int(sm_count), clock, (f"Roofline peak: {sm_count} SMs (recorded by {source}) at {clock:g} MHz, the "
                                  f"maximum SM clock {slug}/tour.json records for this GPU (a grading records none).")


def chromium() -> str | None:
    """The path of a Chromium or Chrome on PATH, or None when there is none."""
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome",
                                                "google-chrome-stable"))), None)


def report_page(out: Path = IMG_DIR / "report-page.png", height: int = 2860) -> str:
    """Screenshot the recorded grading's report page (retargeted) into `out`; returns what was
    written.  Raises PictureError without the recording (recorded_peak) or Chromium."""
    browser = chromium()
    if browser is None:
        raise PictureError("the report page's screenshot needs Chromium (Debian: chromium)")
    report, profile = retarget(read_json(REPORT, PictureError)), read_json(PROFILE, PictureError)
    sm_count, clock_mhz, note = recorded_peak(report)
    report["notes"] = list(report.get("notes") or []) + [note]
    page = html.render_lab_html(report, profile, peak_gflops=plot.peak_fp32_gflops(sm_count, clock_mhz))
    with tempfile.TemporaryDirectory(prefix="stencil-page-") as tmp:
        path = Path(tmp) / "report.html"
        path.write_text(page, encoding="utf-8")
        command = [browser, "--headless", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                   "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={Path(tmp) / 'profile'}",
                   f"--window-size={PAGE_WIDTH},{height}", f"--screenshot={Path(out).resolve()}", path.as_uri()]
        if os.geteuid() == 0:
            command.insert(1, "--no-sandbox")       # Chromium refuses to sandbox itself as root
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if not Path(out).is_file():
        raise PictureError(f"Chromium wrote no screenshot: {done.stderr[-500:]}")
    return f"report page: {out} (the grading recorded in {REPORT.name}, targets as lab.json holds them now)"


def _panel(ax, variants: list[dict], x: str | None, y: str | None, title: str, best: dict | None,
           default: dict | None, vmin: float, vmax: float):
    """One sweep into matplotlib axes: a heat map over tune.json's plot axes (x, y), each cell the best
    over the other parameters, colours from vmin to vmax, returned for a colour bar; without two axes,
    one bar per variant (None).  Fractions of the copy bandwidth of the same run."""
    ok = [v for v in variants if v.get("status") == "ok" and v.get("ratio") is not None]
    ax.set_title(title, fontsize=9)
    if not (x and y and x != y):
        ax.bar(range(len(ok)), [v["ratio"] for v in ok],
               color=["tab:orange" if best and v["params"] == best else "tab:blue" for v in ok])
        ax.set_xticks(range(len(ok)), [tune.variant_name(v["params"]) for v in ok], rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("fraction of copy bandwidth")
        return None
    xs, ys = (sorted({v["params"][axis] for v in variants}) for axis in (x, y))
    cells: dict[tuple, float] = {}
    for v in ok:
        key = (v["params"][x], v["params"][y])
        cells[key] = max(cells.get(key, 0.0), v["ratio"])
    bottom = min(vmin, vmax - 1e-6)
    image = ax.imshow([[cells.get((a, b), math.nan) for a in xs] for b in ys], origin="lower", cmap="viridis",
                      vmin=bottom, vmax=vmax, aspect="auto")
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
            light = cells[(a, b)] > bottom + 0.6 * (vmax - bottom)            # dark text on yellows
            ax.text(j, i, text, ha="center", va="center", color="black" if light else "white", fontsize=8)
    return image


def _draw(plt, lab: str, space: tune.TuneSpace, files: list[dict], path: Path) -> Path:
    """Tuning files' contents (one GPU's each) side by side on one colour scale, as PNG at `path`."""
    ratios = [v["ratio"] for d in files for v in d["variants"]
              if v.get("status") == "ok" and v.get("ratio") is not None]
    fig, axes = plt.subplots(1, len(files), figsize=(5.2 * len(files), 4.3), squeeze=False)
    images = [_panel(ax, d["variants"], space.plot_x, space.plot_y, f"{d['device']} ({d['date']})\n"
                     + (f"best {tune.variant_name(d['best'])}: {d['best_ratio']:.2f} x copy" if d["best"]
                        else "no variant passed"),
                     d["best"], d.get("default"), min(ratios, default=0.0), max(ratios, default=1.0))
              for ax, d in zip(axes[0], files)]
    if any(i is not None for i in images):
        fig.colorbar(next(i for i in images if i is not None), ax=list(axes[0]),
                     label="effective bandwidth / copy bandwidth")
    others = [p for p in space.parameters if p not in (space.plot_x, space.plot_y)]
    fig.suptitle(f"make tune, {lab}: effective bandwidth / copy bandwidth measured in the same run"
                 + (f"\n(each cell: the best over {', '.join(others)})" if others else ""), fontsize=10, y=1.06)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return Path(path)


def draw_sweep(sweep: tune.LabSweep, path: Path) -> Path | None:
    """`make tune`'s picture of one finished sweep, as one panel of draw_devices'; None without matplotlib."""
    plt = plot.pyplot()
    return plt and _draw(plt, sweep.lab, sweep.space, [tune.tuning_data(sweep)], path)


def draw_devices(lab: str, devices: list[str], path: Path, kit_root: Path = KIT_ROOT) -> Path:
    """`grade.py tune --draw`: LAB's tuning files of several GPUs side by side, as PNG.  TuneError: no
    tune.json or no tuning file; UsageError (exit 2) without matplotlib."""
    lab_dir = tune.find_lab(lab, kit_root)
    space = tune.load_space(lab_dir)
    if space is None:
        raise tune.TuneError(f"{lab_dir.name} has no {tune.TUNE_FILE}")
    files = [tune.load_tuning(lab_dir, device) for device in devices]
    for device, data in zip(devices, files):
        if data is None:
            raise tune.TuneError(f"no tuning file {display_path(tune.tuning_path(lab_dir, device))}")
    return _draw(plot.pyplot("tune --draw's pictures"), lab_dir.name, space, files, path)
