"""A package's re-exported names, imported on first use (PEP 562).

A package whose `__init__` imports all its modules makes every light submodule heavy: importing
`fair_pipeline.selection.elicitation.defaults` for one constant would load scipy.stats and pandas through the
re-exports, and `fair-pipeline elicit --help` would take seconds. A package lists its exports here instead; the
names stay importable as before (`from fair_pipeline.selection import rank_candidates`)."""
from __future__ import annotations

import importlib
import sys
from typing import Callable


def lazy_exports(package: str, exports: dict[str, tuple[str, ...]]) -> tuple[list[str], Callable[[str], object]]:
    """`__all__` and the module-level `__getattr__` of `package`, whose names live in the modules of `exports`
    ({module: names}); a name is imported the first time it is read, then kept on the package."""
    owner = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> object:
        if name not in owner:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(owner[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    return sorted(owner), __getattr__
