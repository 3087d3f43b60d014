"""The batch engines: each module of this folder defines one batch.BatchEngine subclass, found by
engines() and made `grade.py <name>` by commands.py; a new engine is one module, no other edit.
"""

from __future__ import annotations

import importlib
import pkgutil

from ..batch import BatchEngine


def engines() -> list[type[BatchEngine]]:
    """Every BatchEngine subclass defined by a module of this folder, sorted by name."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        found += [obj for obj in vars(module).values() if isinstance(obj, type) and issubclass(obj, BatchEngine)
                  and obj is not BatchEngine and obj.__module__ == module.__name__]
    return sorted(found, key=lambda engine: engine.name)
