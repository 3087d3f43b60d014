"""The instructor's web pages from the Jinja2 templates of grader/stencil_grader/templates/, autoescaped with
grading/html.py's escape unless html.Markup.  Jinja2 is optional (grader/requirements.txt): without it, write raises
ClassError naming the package."""

import functools
from pathlib import Path
from urllib.parse import quote

from ..base.files import write_atomic
from ..grading import html, score
from . import grades, outdir
from .submissions import ClassError

INSTALL = "python3-jinja2 (Debian), or: python3 -m pip install Jinja2"


def href(*parts: str) -> str:
    """parts joined by "/", each percent-encoded (a name's bytes that are not UTF-8 as they were)."""
    return "/".join(quote(str(p).encode("utf-8", "surrogateescape"), safe="") for p in parts)


def _escaped(value) -> str:
    return value if hasattr(value, "__html__") else html.Markup(html.escape(value))


@functools.lru_cache(maxsize=1)
def environment():
    """The Jinja2 environment of the kit's templates; ClassError when Jinja2 is missing."""
    try:
        import jinja2
    except ImportError as err:
        raise ClassError(f"the instructor's pages need Jinja2 ({err}): install {INSTALL}") from None
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(html.TEMPLATES), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, finalize=_escaped)
    env.globals.update(css=html.css(), href=href, is_grade=score.is_grade, reason=grades.reason,
                       class_total=grades.total, STUDENTS=outdir.STUDENTS, SIMILARITY=outdir.SIMILARITY)
    return env


def write(path: Path, template: str, **context) -> Path:
    """templates/<template> rendered with context (and the globals of environment()), written to path by rename;
    returns path.  ClassError without Jinja2."""
    return write_atomic(Path(path), environment().get_template(template).render(**context))
