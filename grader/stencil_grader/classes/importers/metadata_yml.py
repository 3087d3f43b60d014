"""Who submitted each folder of a Gradescope export, from its submission_metadata.yml (YAML written
by Ruby's Psych, keys as Ruby symbols; several submitters for a group):

    submission_409194023:
      :submitters:
      - :name: First Last
        :sid: '123456789'
        :email: first@example.edu
      :created_at: 2026-04-26 17:34:00.861687000 Z
      :results: ...autograder output, any text...

Read with PyYAML's composer and its base resolver: every scalar stays text (a SID "0042" is not
a number) and a Ruby tag (!ruby/string) is kept as the text it tags; only each record's
:submitters: is read, so autograder output that looks like a submitter is never taken for one.
"""

from __future__ import annotations

#: What the Gradescope importer needs (grader/requirements.txt): the module, and where to get it.
YAML_MISSING = ("reading Gradescope's submission_metadata.yml needs PyYAML: install Debian's python3-yaml "
                "(or pip install PyYAML)")
_NULL = ("~", "null", "Null", "NULL")
FIELDS = ("name", "sid", "email")


class MetadataError(ValueError):
    """submission_metadata.yml is not what Gradescope writes (the message names the line)."""


def _pairs(node, what: str) -> list[tuple[str, object]]:
    """(key without its Ruby ':', value node) of a YAML mapping node; MetadataError naming its line."""
    import yaml
    if not isinstance(node, yaml.MappingNode):
        raise MetadataError(f"line {node.start_mark.line + 1}: {what} is not a mapping")
    return [(str(k.value).lstrip(":"), v) for k, v in node.value if isinstance(k, yaml.ScalarNode)]


def _text(node) -> str:
    import yaml
    if not isinstance(node, yaml.ScalarNode):
        raise MetadataError(f"line {node.start_mark.line + 1}: a submitter's field is not text")
    return "" if node.value in _NULL else node.value


def read_submitters(text: str) -> dict[str, list[dict[str, str]]]:
    """{submission folder: [{"name", "sid", "email"}, ...]} in file order, every value text ("" when
    absent).  MetadataError naming the line it cannot read, or saying PyYAML is missing."""
    try:
        import yaml
    except ModuleNotFoundError:
        raise MetadataError(YAML_MISSING) from None
    try:
        root = yaml.compose(text, Loader=yaml.BaseLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "context_mark", None) or getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        raise MetadataError(f"{where}{getattr(err, 'problem', None) or err}") from None
    records: dict[str, list[dict[str, str]]] = {}
    for key, record in _pairs(root, "the file") if root is not None else []:
        people = dict(_pairs(record, key)).get("submitters")
        if people is not None and not isinstance(people, yaml.SequenceNode) and people.value not in ("", *_NULL):
            raise MetadataError(f"line {people.start_mark.line + 1}: :submitters: holds {people.value!r}, not a list")
        found = []
        for person in people.value if isinstance(people, yaml.SequenceNode) else []:
            fields = dict(_pairs(person, "a submitter"))
            found.append({k: _text(fields[k]) if k in fields else "" for k in FIELDS})
        records[key] = found
    return records
