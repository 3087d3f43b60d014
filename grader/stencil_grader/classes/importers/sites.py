"""The course sites: one module each (canvas.py, moodle.py, gradescope.py), found here by name.

A site module defines:

    NAME                          the --from word and the roster's "site"
    RULES                         its export's names as a table: {rule: (regular expression, meaning)}
    parse(export, groups)         the export (export.Export) read as submissions (common.Parsed);
                                  ExportError when it is not laid out so, or is a group
                                  assignment's and groups is None (one line naming --groups FILE)
    read_groups(path)             the site's group file read as common.Groups (GroupsError)
    gradebook(out, book)          its gradebook files from a common.Book: ([paths], [notes])
    RENAMED (optional)            the site's name for a re-uploaded kernel.cu (a regular expression)
    GROUPS_HINT (optional)        a line said on an import without --groups, where the export
                                  cannot show it is a group assignment's

A new site is one module here and its name in SITES.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .common import Groups, Parsed
from .export import Export, ExportError

SITES = ("canvas", "moodle", "gradescope")


def module(site: str) -> ModuleType:
    """The module of a site of SITES."""
    if site not in SITES:
        raise ValueError(f"unknown site {site!r}: the sites are {', '.join(SITES)}")
    return importlib.import_module(f"{__package__}.{site}")


def parse(site: str, export: Export, groups: Groups | None = None) -> Parsed:
    """The export read as `site`'s layout.  ExportError when nothing in it has that layout (the
    wrong --from, or not an export), or the site's module refuses it."""
    parsed = module(site).parse(export, groups)
    if not parsed.submissions:
        example = f" (e.g. {parsed.skipped[0][0]!r})" if parsed.skipped else ""
        raise ExportError(f"nothing in it is laid out as a {site.capitalize()} export{example}; is --from right?")
    return parsed
