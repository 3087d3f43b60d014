"""The batch engines: each module of this folder defines one batch.BatchEngine subclass, found by engines() and made
`grade.py <name>` by commands.py; a new engine is one module, no other edit."""

import importlib
import pkgutil

from ..batch import BatchEngine


def engines() -> list[type[BatchEngine]]:
    """Every BatchEngine subclass defined by a module of this folder, sorted by name."""
    modules = [importlib.import_module(f"{__name__}.{info.name}") for info in pkgutil.iter_modules(__path__)]
    return sorted((obj for module in modules for obj in vars(module).values() if isinstance(obj, type)
                   and issubclass(obj, BatchEngine) and obj.__module__ == module.__name__), key=lambda e: e.name)
