"""The handouts' raster pictures, drawn from what was recorded, never from a new measurement
(`grade.py pictures`): path-SLUG.png and roofline-SLUG.png from handouts/data/SLUG/tour.json
(matplotlib), and with --report-page report-page.png, the recorded grading of tests/python/data/html/
under today's targets (retarget), screenshot by headless Chromium.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .. import KIT_ROOT
from ..base import labspec
from ..base.files import read_json
from ..grading import html, plot, score
from .records import DATA_DIR, load_recordings
from . import smemroof, tuning
from .tour import draw, recorded_rows

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
    return draw(recorded_rows(record), device["name"], int(device["sm_count"]), Path(img_dir) / f"path-{slug}.png",
                clock_mhz=float(device["sm_clock_max_mhz"]), roofline_path=Path(img_dir) / f"roofline-{slug}.png",
                title=title, params_of=recorded_parameters(device["name"]),
                shared_bytes_per_clock=smemroof.recorded_bytes_per_clock(slug, data_dir=data_dir))


def recorded_parameters(device: str):
    """params_of(lab, impl) for tour.draw: a reference's TUNE_ parameters as lab.mk builds it on `device`;
    None (unknown) for any other row or where they cannot be read."""
    def params_of(lab: str, impl: str) -> dict | None:
        if impl != "reference":
            return None
        lab_dir = KIT_ROOT / "labs" / lab
        try:
            params = tuning.source_defaults(tuning.reference_source(lab_dir))
            params.update(tuning.tuned_parameters(lab_dir, device))
        except (tuning.TuneError, OSError):
            return None
        return params
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
        if perf.get("verdict") in ("pass", "slow"):
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
