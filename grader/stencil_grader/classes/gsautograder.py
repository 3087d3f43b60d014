"""`grade.py gradescope-autograder`: the zip of a Gradescope autograder that serves one lab's grades (grader/README.md,
section 9, "How the grades reach each site"): setup.sh, run_autograder, serve.py (gsserve.py), index.json ({"lab",
"made_at", "kit", "by_email", "by_sid"}: {key: {"grade": "grades/<n>.json", "submission": id}}) and grades/<n>.json."""

import io
import json
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..base.files import sha256_of, write_atomic
from . import classtable, outdir
from .importers import gradescope
from .importers.roster import is_group
from .submissions import ROSTER, SOURCE, ClassError

SERVER = Path(__file__).with_name("gsserve.py")
SETUP = """#!/usr/bin/env bash
# Gradescope runs this once when it builds the autograder's image: serve.py needs only python3.
set -euo pipefail
command -v python3 >/dev/null || { apt-get update && apt-get install -y --no-install-recommends python3; }
"""
RUN = """#!/usr/bin/env bash
# Gradescope runs this for each submission: serve the grade the stencil lab kit computed (serve.py).
exec python3 "${AUTOGRADER_ROOT:-/autograder}/source/serve.py"
"""


class GradescopeZipError(ClassError):
    """The zip cannot be made: the reason, in one line, and what would be right."""


@dataclass
class Built:
    """What build() wrote: the zip, the grades it serves, the students it cannot (no grade, id or same kernel.cu)."""
    path: Path
    served: int
    without_grade: list[str]


def default_zip(out: Path, lab: str) -> Path:
    """OUT/gradebook/gradescope-<lab>-autograder.zip, rebuilt from OUT whenever asked."""
    return Path(out) / outdir.GRADEBOOK / f"gradescope-{lab}-autograder.zip"


def _member(archive: zipfile.ZipFile, name: str, data: str | bytes, executable: bool = False) -> None:
    """Add one file; the executables keep their mode bits (Gradescope runs run_autograder itself)."""
    info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
    archive.writestr(info, data)


def build(out: Path, lab: str, dest: Path | None = None, force: bool = False) -> Built:
    """Write the autograder zip of lab from OUT (dest: default_zip; another existing dest only with force).
    GradescopeZipError: no class grading or Gradescope roster, no grade of lab, an e-mail or SID on two folders."""
    out = Path(out).resolve()
    if not (out / outdir.MANIFEST).is_file():
        raise GradescopeZipError(f"{out} holds no class grading ({outdir.MANIFEST} is missing): give the --out "
                                 "folder of grade.py class")
    t = classtable.load(out, [lab])
    if t.roster is None:
        raise GradescopeZipError(t.roster_note or f"the class of {out} has no roster: import the lab with "
                                                  "grade.py import --from gradescope")
    target = Path(dest) if dest is not None else default_zip(out, lab)
    if dest is not None and target.exists() and not force:
        raise GradescopeZipError(f"{target} exists: give another --zip, or --force to replace it")
    roster, table = t.roster, t.reports
    by_email, by_sid, owner, files, without = {}, {}, {}, {}, []
    class_dir = Path((outdir.read_json(out / outdir.MANIFEST) or {}).get("submissions", ""))
    for folder, row in sorted(roster.rows.items()):
        graded_in = row.get(f"{lab} group") or folder
        if row.get("site") != gradescope.NAME or is_group(row) or graded_in not in table:
            continue
        keys = {"e-mail": row.get("email", "").strip().lower(), "SID": row.get("site_id", "")}
        for kind, key in keys.items():
            if key and owner.setdefault(kind + key, folder) != folder:
                raise GradescopeZipError(f"the {kind} {key!r} belongs to two student folders ({owner[kind + key]!r} "
                                         f"and {folder!r}) in {ROSTER}: merge them into one folder")
        source = outdir.gradescope_path(out, lab, graded_in)
        submission = gradescope.submission_id(row.get(f"{lab} file", ""))
        graded = ((table[graded_in].get(lab) or {}).get("class") or {}).get("source_sha256")
        if not source.is_file() or not submission \
                or graded != sha256_of(class_dir / graded_in / lab / SOURCE):
            without.append(folder)
            continue
        entry = {"grade": files.setdefault(source, f"grades/{len(files) + 1}.json"), "submission": submission}
        for index, key in zip((by_email, by_sid), keys.values()):
            if key:
                index[key] = entry
    if not files:
        raise GradescopeZipError(f"no Gradescope student of {out} has a grade of {lab} (grade the class first; "
                                 "what is not measured has no file to serve)")
    index = {"lab": lab, "made_at": outdir.now(), "kit": __version__, "by_email": by_email, "by_sid": by_sid}
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        _member(archive, "setup.sh", SETUP, executable=True)
        _member(archive, "run_autograder", RUN, executable=True)
        _member(archive, "serve.py", SERVER.read_bytes(), executable=True)
        _member(archive, "index.json", json.dumps(index, indent=2, ensure_ascii=False) + "\n")
        for source, member in files.items():
            _member(archive, member, source.read_bytes())
    write_atomic(target, data.getvalue())
    return Built(target, len(files), without)
