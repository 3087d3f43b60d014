"""The side-by-side page of one flagged pair of files (similarity.py): OUT/similarity/<lab>/pair-<rank>.html.

    pair_page(result, pair, rank, settings) -> str

Both files in full, side by side, line numbers on the left, the code copydetect found in both
highlighted (<mark>), the pair's score and each file's share above.  Self-contained (inline CSS,
no script, no network asset), like the report pages.  Everything shown comes from students (the
folder names, the code) and is escaped; control characters and the bidirectional overrides and
isolates, with which code can be made to read otherwise than it compiles ("Trojan Source",
CVE-2021-42574), are shown as visible escapes (\\u202e) instead of being obeyed.
"""

from __future__ import annotations

import re

from ..grading import html as lab_html
from ..grading.html import escape as _e

#: Characters shown as escapes: C0 and C1 controls but tab and newline, DEL, the bidirectional
#: marks, embeddings, overrides and isolates.
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

CSS = (lab_html.CSS + ".sides{display:flex;gap:12px;align-items:flex-start}.side{flex:1;min-width:0}"
       "pre.code{white-space:pre;overflow-x:auto;word-break:normal;font-size:12px;line-height:1.35}"
       ".ln{color:#8a94a3;user-select:none}mark{background:#fde68a;color:inherit}"
       ".ctl{color:#c53030;font-weight:700}main{max-width:none}")


def _visible(text: str) -> str:
    """Escaped text, each _INVISIBLE character as a red \\uXXXX."""
    out, last = [], 0
    for m in _INVISIBLE.finditer(text):
        out.append(_e(text[last:m.start()]))
        out.append(f'<span class="ctl">\\u{ord(m.group()):04x}</span>')
        last = m.end()
    out.append(_e(text[last:]))
    return "".join(out)


def highlighted(text: str, ranges: list[tuple[int, int]]) -> str:
    """text as the lines of a <pre>, each with its number, the characters of `ranges` ([start,
    end) offsets into text) in <mark>; everything escaped (_visible)."""
    marked = bytearray(len(text))
    for start, end in ranges:
        start, end = max(0, start), min(len(text), end)
        if end > start:
            marked[start:end] = b"\x01" * (end - start)
    lines = text.split("\n")
    width = len(str(len(lines)))
    out, pos = [], 0
    for number, line in enumerate(lines, 1):
        parts, i = [], 0
        while i < len(line):
            on = marked[pos + i]
            j = i
            while j < len(line) and marked[pos + j] == on:
                j += 1
            piece = _visible(line[i:j])
            parts.append(f"<mark>{piece}</mark>" if on else piece)
            i = j
        out.append(f'<span class="ln">{number:>{width}} </span>' + "".join(parts))
        pos += len(line) + 1
    return "\n".join(out)


def _side(title: str, kind: str, share: float, text: str, ranges: list[tuple[int, int]], ident: str) -> str:
    shared = sum(e - s for s, e in ranges)
    return (f'<div class="side" id="{ident}"><h2>{_e(title)}</h2><p class="muted">{_e(kind)}; {share:.1%} of its '
            f"fingerprinted code shared; {shared} of its {len(text)} characters highlighted</p>"
            f'<pre class="code">{highlighted(text, ranges)}</pre></div>')


def pair_page(result, pair, rank: int, settings: str) -> str:
    """The page of `pair` (similarity.Pair) of `result` (similarity.LabResult), ranked `rank`."""
    a = result.sources[(pair.a_kind, pair.a)]
    b = result.sources[(pair.b_kind, pair.b)]
    title = f"{result.lab}: similarity {pair.score:.3f}"
    body = (f'<header id="pair"><h1>{_e(result.lab)}: pair {rank}, score {pair.score:.3f}</h1>'
            f"<p><b>{_e(pair.a)}</b> ({_e(pair.a_kind)}) and <b>{_e(pair.b)}</b> ({_e(pair.b_kind)}): "
            f"{pair.a_share:.1%} and {pair.b_share:.1%} of their fingerprinted code is shared "
            f"({pair.matched} normalised characters).</p>"
            f'<p class="muted">{_e(settings)}. Highlighted: the code of each file that copydetect matched in the '
            "other (after comments, white space and names were normalised), not necessarily in the same "
            "order. A pointer for a look by the instructor, never a grade: shared code may have a "
            "common source (the handouts, the textbook, the lab's own hints).</p></header>"
            '<section id="sides" class="sides">'
            + _side(pair.a, pair.a_kind, pair.a_share, a.text, pair.a_ranges, "side-a")
            + _side(pair.b, pair.b_kind, pair.b_share, b.text, pair.b_ranges, "side-b")
            + "</section>")
    return lab_html.page(title, body, CSS)
