"""`grade.py similarity`: the kernel.cu files of a class compared lab by lab with copydetect (optional: require()),
pointers for the instructor, never a grade; which pairs, the score, FLAG and the files written in
OUT/similarity/<lab>/ (no student's name in a path): grader/README.md, section 9, "Around the grades"."""

import collections
import io
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from ..base.files import write_atomic, write_json
from ..grading import build, html
from . import outdir, plan, submissions
from .importers.common import csv_text
from .submissions import ClassError, shown

TOOL = "copydetect"
INSTALL = "python3 -m pip install copydetect"
#: Characters of normalised code per fingerprint (copydetect's noise threshold, k).  40 keeps
#: one-line idioms that every solution writes (`const int V = blockIdx.V * V + threadIdx.V;`,
#: 36 characters) from counting alone; 25, copydetect's default, let two independent lab 4
#: solutions reach 0.78.
NOISE = 40
#: The score at which a pair is flagged (module docstring: the figures it lies between).
FLAG = 0.80
#: Pairs below FLAG listed in pairs.txt, for context.
REPORTED_BELOW = 10
#: Side-by-side pages written at most per lab (the highest flagged pairs; pairs.csv lists them all).
MAX_PAGES = 300
KINDS = ("student", "against", "kit")
#: Characters a pair page shows as escapes: C0 and C1 controls but tab and newline, DEL, the
#: bidirectional marks, embeddings, overrides and isolates, with which code can be made to read
#: otherwise than it compiles ("Trojan Source", CVE-2021-42574).
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def require():
    """The copydetect module; ClassError (one line: how to install it) when it cannot be imported."""
    try:
        import copydetect.utils          # binds copydetect, with the utils used below
    except ImportError as err:
        raise ClassError(f"similarity needs {TOOL}, an optional instructor tool ({err}); install it with: "
                         f"{INSTALL}") from None
    return copydetect


#: A file compared: its name (a student's folder, a path under --against or in the kit), kind (KINDS), text.
Source = collections.namedtuple("Source", "name kind text")


@dataclass
class Pair:
    """Two files of a lab: each one's share, the score (the larger), the matched characters, and copydetect's slices."""
    a: str
    a_kind: str
    b: str
    b_kind: str
    score: float
    a_share: float
    b_share: float
    matched: int
    a_slices: object = field(default=None, repr=False)
    b_slices: object = field(default=None, repr=False)
    flagged: bool = False
    page: str = ""


@dataclass
class LabResult:
    """Every pair of one lab, highest score first, and what was compared."""
    lab: str
    sources: dict[tuple[str, str], Source]
    pairs: list[Pair]
    threshold: float
    version: str
    notes: list[str] = field(default_factory=list)
    boilerplate: bool = True

    @property
    def flagged(self) -> list[Pair]:
        return [p for p in self.pairs if p.flagged]

    def settings(self) -> str:
        return (f"{TOOL} {self.version}, fingerprints of {NOISE} characters of normalised code (comments, white "
                "space and names normalised), " + ("the starter file as boilerplate" if self.boilerplate else
                                                   "no boilerplate (no starter file)")
                + f"; flagged at {self.threshold:.2f}")


def read_text(path: Path) -> tuple[str | None, str]:
    """(the file's text, "") or (None, why not: over build.MAX_SOURCE_BYTES, unreadable); bad UTF-8 as U+FFFD."""
    try:
        with open(path, "rb") as f:
            data = f.read(build.MAX_SOURCE_BYTES + 1)
    except OSError as err:
        return None, f"cannot be read ({err.strerror})"
    if len(data) > build.MAX_SOURCE_BYTES:
        return None, f"over {build.MAX_SOURCE_BYTES >> 20} MiB"
    return data.decode("utf-8", "replace"), ""


def _sources(paths, kind: str, notes: list[str]) -> list[Source]:
    """A Source of each (name, path, what a note calls it) that can be read; a note for each that cannot."""
    found = []
    for name, path, called in paths:
        text, why = read_text(path)
        if text is None:
            notes.append(f"{called} not compared: {why}")
        else:
            found.append(Source(name, kind, text))
    return found


def student_sources(subs: Path, lab: str, notes: list[str]) -> list[Source]:
    """The kernel.cu of each student of the class folder who has one for this lab."""
    paths = ((s, submissions.find_source(subs, s, lab)[0]) for s in submissions.read_students(subs).students)
    return _sources([(s, p, f"{shown(s)}/{lab}/{submissions.SOURCE}") for s, p in paths if p is not None],
                    "student", notes)


def other_sources(lab: str, against: Path | None, kit: Path, notes: list[str]) -> list[Source]:
    """The *.cu of `against` under a folder named as the lab, then the kit's reference and tour kernels."""
    paths = []
    for folder, dirs, files in os.walk(against) if against is not None else ():
        dirs.sort()
        rel = Path(folder).relative_to(against)
        if lab in rel.parts:
            paths += [((rel / n).as_posix(), Path(folder) / n, f"--against {shown((rel / n).as_posix())}")
                      for n in sorted(files) if n.endswith(".cu")]
    reference = Path(kit) / "reference"
    ours = [reference / lab / submissions.SOURCE] + sorted((reference / "tour" / lab).glob(f"*/{submissions.SOURCE}"))
    return (_sources(paths, "against", notes)
            + _sources([(p.relative_to(kit).as_posix(), p, "") for p in ours if p.is_file()], "kit", []))


def _repair_offsets(fp) -> None:
    """Mend copydetect 0.5.0's offsets (rows [normalised index, characters removed before it]): filter_code
    records a struct or class name's row with the name's length less one instead of the running count.  The
    next row holds the true count plus that length less one; a row is mended only when the mended value lands
    on a whole identifier of that length (a copydetect that records it right is left alone)."""
    rows, code, text = fp.offsets, fp.filtered_code, fp.raw_code
    for r in range(1, len(rows) - 1):
        j, bad = int(rows[r][0]), int(rows[r][1])
        if j >= len(code) or code[j] != "O":
            continue
        true = int(rows[r + 1][1]) - bad
        start = j + true
        name = text[start:start + bad + 1]
        if true >= int(rows[r - 1][1]) and name.isidentifier() \
                and not (text[start + bad + 1:start + bad + 2] or " ").isidentifier() \
                and not (text[start - 1:start] or " ").isidentifier():
            rows[r][1] = true


def fingerprint(cd, text: str, boilerplate: set | None = None):
    """copydetect's CodeFingerprint of a CUDA text (NOISE, window 1), the boilerplate's fingerprints removed after
    (copydetect 0.5.0's own filter would also drop a file's repeated code)."""
    fp = cd.CodeFingerprint("kernel.cu", NOISE, 1, None, True, "cuda", fp=io.StringIO(text))
    if len(fp.offsets):
        _repair_offsets(fp)
    if boilerplate:
        for h in fp.hashes & boilerplate:
            del fp.hash_idx[h]
        fp.hashes = fp.hashes - boilerplate
        fp.token_coverage = cd.utils.get_token_coverage(fp.hash_idx, NOISE, len(fp.filtered_code))
    return fp


def compare_lab(lab: str, students: list[Source], others: list[Source], starter: str | None,
                threshold: float = FLAG) -> LabResult:
    """Every pair of students, and of a student and another file; highest score first, flagged at `threshold`."""
    cd = require()
    boilerplate = set(fingerprint(cd, starter).hashes) if starter else set()
    prints = {(s.kind, s.name): fingerprint(cd, s.text, boilerplate) for s in students + others}
    pairs = []
    for i, a in enumerate(students):
        for b in students[i + 1:] + others:
            fa, fb = prints[(a.kind, a.name)], prints[(b.kind, b.name)]
            matched, (sa, sb), (slices_a, slices_b) = cd.compare_files(fa, fb) if fa.hashes & fb.hashes \
                else (0, (0.0, 0.0), (None, None))
            pairs.append(Pair(a.name, a.kind, b.name, b.kind, round(max(float(sa), float(sb)), 4), round(float(sa), 4),
                              round(float(sb), 4), int(matched), slices_a, slices_b))
    pairs.sort(key=lambda p: (-p.score, p.a, p.b))
    for rank, p in enumerate(pairs, 1):
        if p.score >= threshold:
            p.flagged, p.page = True, f"pair-{rank}.html" if rank <= MAX_PAGES else ""
    sources = {(s.kind, s.name): s for s in students + others}
    result = LabResult(lab, sources, pairs, threshold, getattr(cd, "__version__", "?"), boilerplate=bool(starter))
    if len(result.flagged) > MAX_PAGES:
        result.notes.append(f"{len(result.flagged)} pairs flagged: pages written for the {MAX_PAGES} highest "
                            "(pairs.csv lists them all)")
    return result


def highlighted(text: str, slices) -> html.Markup:
    """text escaped, its slices in <mark> (copydetect's highlight_overlap), each _INVISIBLE character as \\uXXXX."""
    if slices is not None and len(slices) == 2 and len(slices[0]):
        marked, _ = require().utils.highlight_overlap(text, slices, "<mark>", "</mark>", escape_html=True)
    else:
        marked = html.escape(text)
    return html.Markup(_INVISIBLE.sub(lambda m: f'<span class="ctl">\\u{ord(m.group()):04x}</span>', marked))


def _sides(p: dict) -> list[tuple]:
    """(name, kind, other's name, other's kind) of a pair (asdict(Pair)), from each side."""
    return [(p.get("a"), p.get("a_kind"), p.get("b"), p.get("b_kind")),
            (p.get("b"), p.get("b_kind"), p.get("a"), p.get("a_kind"))]


def lab_folder(out: Path, lab: str) -> Path:
    """OUT/similarity/<lab> (lab: a lab of the kit, never a student's string)."""
    return Path(out) / outdir.SIMILARITY / lab


def _side(result: LabResult, pair: Pair, side: str) -> dict:
    """One side of a pair page (templates/pair.html)."""
    name, kind, share, slices = (getattr(pair, side + key) for key in ("", "_kind", "_share", "_slices"))
    text = result.sources[(kind, name)].text
    return {"id": side, "name": name, "kind": kind, "share": share, "chars": len(text),
            "code": highlighted(text, slices),
            "marked": 0 if slices is None or not len(slices) else int(sum(slices[1] - slices[0])),
            "numbers": "\n".join(map(str, range(1, text.count("\n") + 2)))}


def write(out: Path, result: LabResult, generated_at: str) -> list[Path]:
    """Write the lab's files by rename, removing pages no pair of this run has; returns the paths written."""
    from . import pages
    folder = lab_folder(out, result.lab)
    rows = [["rank", "score", "a_share", "b_share", "matched_chars", "a", "a_kind", "b", "b_kind", "flagged", "page"]]
    rows += [[rank, f"{p.score:.4f}", f"{p.a_share:.4f}", f"{p.b_share:.4f}", p.matched, submissions.sheet_cell(p.a),
              p.a_kind, submissions.sheet_cell(p.b), p.b_kind, "yes" if p.flagged else "no", p.page]
             for rank, p in enumerate(result.pairs, 1)]
    written = [write_atomic(folder / "pairs.csv", csv_text(rows)),
               write_atomic(folder / "pairs.txt", "\n".join(summary_lines(result)) + "\n")]
    pairs = [{k: v for k, v in asdict(p).items() if not k.endswith("_slices")} for p in result.pairs]
    highest: dict[str, dict] = {}
    for p in pairs:                            # highest first: a student's first pair is their highest
        for me, kind, other, other_kind in _sides(p):
            if kind == "student" and me not in highest:
                highest[me] = {"score": p["score"], "other": other, "other_kind": other_kind, "page": p["page"]}
    data = {"lab": result.lab, "generated_at": generated_at, "tool": TOOL, "version": result.version,
            "noise": NOISE, "threshold": result.threshold, "settings": result.settings(), "notes": result.notes,
            "pairs": len(pairs), "highest": highest, "flagged": [p for p in pairs if p["flagged"]]}
    written.append(write_json(folder / "similarity.json", data))
    for rank, p in enumerate(result.pairs, 1):
        if p.page:
            written.append(pages.write(folder / p.page, "pair.html", title=f"{result.lab}: similarity {p.score:.3f}",
                                       lab=result.lab, rank=rank, pair=p, settings=result.settings(),
                                       sides=[_side(result, p, "a"), _side(result, p, "b")]))
    for stale in set(folder.glob("pair-*.html")) - set(written):
        stale.unlink()
    return written


def summary_lines(result: LabResult) -> list[str]:
    """pairs.txt, and what the console prints: the settings, the flagged pairs, the next ones."""
    kinds = {k: sum(1 for (kind, _) in result.sources if kind == k) for k in KINDS}
    lines = [f"similarity of {result.lab}: {kinds['student']} student file(s), compared with each other and with "
             f"{kinds['against'] + kinds['kit']} other file(s) ({kinds['against']} from --against, {kinds['kit']} of "
             f"the kit); {len(result.pairs)} pair(s)", f"  {result.settings()}",
             "  a pointer to look at, never a grade: a score is the larger of the two files' shared parts"]
    lines += [f"  note: {shown(n)}" for n in result.notes]
    flagged = result.flagged
    lines.append(f"{len(flagged)} pair(s) flagged" + (":" if flagged else ""))
    shown_below = [p for p in result.pairs if not p.flagged][:REPORTED_BELOW]
    for title, group in ((None, flagged), (f"the {len(shown_below)} highest below {result.threshold:.2f}:",
                                           shown_below)):
        if title and group:
            lines.append(title)
        for p in group:
            lines.append(f"  {p.score:.3f} ({p.a_share:.3f} / {p.b_share:.3f})  {shown(p.a)}  <->  {shown(p.b)}"
                         + (f" ({p.b_kind})" if p.b_kind != "student" else "") + (f"  {p.page}" if p.page else ""))
    return lines


def run(subs: str | Path, out: str | Path, labs: list[str] | None = None, against: Path | None = None,
        threshold: float = FLAG, say: Callable[[str], None] = print, kit: Path | None = None) -> list[LabResult]:
    """Compare the class's kernel.cu files of each lab and write OUT/similarity/<lab>/.  ClassError before anything is
    written: copydetect missing, an unknown lab, no class folder, a bad --against, --out or threshold."""
    check(against)
    if not 0.0 < threshold <= 1.0:
        raise ClassError(f"--threshold {threshold:g}: give a score in (0, 1], e.g. {FLAG}")
    subs, out = Path(subs).resolve(), Path(out).resolve()
    kit = Path(kit or plan.KIT_ROOT).resolve()
    specs = plan.select_labs(labs, kit)
    submissions.read_students(subs)
    outdir.check_out(out, subs)
    outdir.claim(out, subs)
    when = outdir.now()
    results = []
    for spec in specs:
        notes: list[str] = []
        students = student_sources(subs, spec.lab, notes)
        if not students:
            continue
        others = other_sources(spec.lab, Path(against).resolve() if against else None, kit, notes)
        starter, _ = read_text(kit / "starter" / spec.lab / submissions.SOURCE)
        if starter is None:
            notes.append(f"no starter file for {spec.lab}: nothing removed as boilerplate")
        result = compare_lab(spec.lab, students, others, starter, threshold)
        result.notes += notes
        write(out, result, when)
        results.append(result)
        say(summary_lines(result)[0])
        say(f"  {len(result.flagged)} flagged; {lab_folder(out, spec.lab) / 'pairs.txt'}")
    return results


def check(against: Path | None) -> None:
    """ClassError when similarity cannot run: copydetect missing, --against not a folder."""
    require()
    if against is not None and not Path(against).is_dir():
        raise ClassError(f"--against {against}: no such folder (earlier submissions and known solutions: "
                         f"AGAINST/.../<lab>/*.cu)")


def class_step(subs: Path, out: Path, labs: list[str], against: Path | None, say: Callable[[str], None],
               kit: Path | None = None) -> list[str]:
    """`grade.py class --similarity`: run() on the graded labs; notes for the summary (a failure is a note)."""
    try:
        results = run(subs, out, labs, against, say=say, kit=kit)
    except Exception as err:             # the grades stand whatever happens here
        return [f"similarity: not written ({type(err).__name__}: {err})"]
    return [f"similarity of {r.lab}: {len(r.flagged)} pair(s) flagged: {lab_folder(out, r.lab) / 'pairs.txt'}"
            for r in results]


def column(out: Path, lab_order: list[str]) -> dict[str, list[dict]]:
    """{student: [{"lab", "score", "other", "other_kind", "page", "flagged"}, ...]}: per lab, the student's flagged
    pairs, else their highest."""
    found: dict[str, list[dict]] = {}
    for lab in lab_order:
        data = outdir.read_json(lab_folder(out, lab) / "similarity.json") or {}
        flagged: dict[str, list[dict]] = {}
        for p in data.get("flagged") or []:
            for me, kind, other, other_kind in _sides(p):
                if kind == "student":
                    flagged.setdefault(str(me), []).append({"lab": lab, "score": p.get("score"), "other": other,
                                                            "other_kind": other_kind, "page": p.get("page"),
                                                            "flagged": True})
        for student, best in (data.get("highest") or {}).items():
            if isinstance(best, dict) and isinstance(best.get("score"), (int, float)):
                found.setdefault(student, []).extend(flagged.get(student) or [dict(best, lab=lab, flagged=False)])
    return found
