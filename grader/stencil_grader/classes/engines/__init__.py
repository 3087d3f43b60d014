"""The batch engines: each module of this folder defines one batch.BatchEngine subclass.

    engines() -> [SlurmEngine, ...]      every engine, found by module, sorted by name

A new engine (HTCondor, PBS, a cloud queue) is one module here and no other edit: it is found
here, and classes/commands.py makes each engine `grade.py <engine.name>`, with the class
options, batch.add_options and the engine's own (engine.add_options).  What it must do is
batch.BatchEngine's docstring; the run folder, the tasks and the merge are the batch layer's
(batch.py, tasks.py), whatever the engine.
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
