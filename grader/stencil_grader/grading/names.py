"""Names of the student's functions as people read them: demangle() (c++filt), kernel_labels()
(ptxas's functions, template instances told apart), kernel_label() (one name, no c++filt) and
simplify() (no template arguments nor parameters, for the symbol check's messages)."""

from __future__ import annotations

import collections
import re
import shutil

from ..base import process

TOOL_TIMEOUT_S = 60.0

_MANGLED = re.compile(r"^_Z(\d+)")
_TEMPLATE_ARGS = re.compile(r"I((?:L[ibj]-?\d+E)+)E")
_INT_ARG = re.compile(r"L[ibj](-?\d+)E")


def demangle(names: list[str]) -> dict[str, str]:
    """Mangled -> demangled names (c++filt, one call); names c++filt leaves alone map to themselves."""
    mangled = [n for n in names if n.startswith("_Z")]
    result = {n: n for n in names}
    if not mangled or not shutil.which("c++filt"):
        return result
    run = process.run(["c++filt"], TOOL_TIMEOUT_S, stdin_text="\n".join(mangled) + "\n")
    lines = run.stdout.splitlines()
    if run.returncode == 0 and len(lines) == len(mangled):
        result.update(zip(mangled, lines))
    return result


def short_name(mangled: str) -> str:
    """'tiled' for '_Z5tiledPKfPfi'; other names (extern "C", nested) unchanged."""
    m = _MANGLED.match(mangled)
    name = mangled[m.end():m.end() + int(m.group(1))] if m else ""
    return name if m and len(name) == int(m.group(1)) else mangled


def kernel_label(mangled: str) -> str:
    """'tiled' for _Z5tiledPKfPfi, 'sweep<4>' for a kernel template with integer arguments
    (no c++filt needed); a name that is not mangled (extern "C") as it is."""
    shown = short_name(mangled)
    m = _MANGLED.match(mangled)
    if m and shown != mangled:
        rest = mangled[m.end() + int(m.group(1)):]
        if t := _TEMPLATE_ARGS.match(rest):
            shown += "<" + ", ".join(_INT_ARG.findall(t.group(1))) + ">"
    return shown


def kernel_labels(names: list[str]) -> dict[str, str]:
    """Mangled name -> label of functions named in ptxas's report: the demangled name without return
    type and parameters, template arguments kept ('stencil3d_zmarch_kernel<true>'); overloads that
    would share a label keep their parameters; without c++filt, kernel_label's."""
    table = demangle(sorted(set(names)))
    labels, full = {}, {}
    for name in names:
        demangled = table.get(name, name)
        if demangled == name:
            labels[name] = full[name] = kernel_label(name) if name.startswith("_Z") else name
        else:
            full[name] = _without_return_type(demangled)
            labels[name] = _without_return_type(_without_parameters(demangled))
    clashes = {label for label, count in collections.Counter(labels.values()).items() if count > 1}
    return {name: full[name] if labels[name] in clashes else labels[name] for name in names}


def simplify(demangled: str) -> str:
    """A demangled name without template arguments and parameter lists, for messages:
    'std::basic_filebuf::open' for 'std::basic_filebuf<char, ...>::open(char const*, ...)'."""
    text = demangled
    while (inner := re.sub(r"<[^<>]*>", "", text)) != text:       # innermost template arguments first
        text = inner
    text = text.split("<", 1)[0].strip()                           # an unclosed one: the rest too
    for suffix in (" const", " volatile", " &", " &&"):
        text = text.removesuffix(suffix)
    if not text.startswith(("vtable", "VTT", "typeinfo")):
        text = _without_parameters(text)
    return text.strip()


def _without_parameters(text: str) -> str:
    """'k<4>' for 'void k<4>(float*, int)': the last top-level (...) group dropped (an operator's kept)."""
    text = text.rstrip()
    depth = 0
    for i in range(len(text) - 1, 0, -1) if text.endswith(")") else ():
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            return text if text[:i].endswith("operator") else text[:i].rstrip()
    return text


def _without_return_type(demangled: str) -> str:
    """'k<4>(float*)' for 'void k<4>(float*)': what follows the last space outside <...> and (...)."""
    depth = 0
    for i in range(len(demangled) - 1, -1, -1):
        depth += (demangled[i] in ">)") - (demangled[i] in "<(")
        if demangled[i] == " " and depth == 0:
            return demangled[i + 1:]
    return demangled
