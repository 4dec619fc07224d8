"""A package's re-exported names, imported on first use (PEP 562).

A package whose `__init__` imports all its modules makes every light submodule heavy: importing
`fair_pipeline.selection.elicitation.defaults` for one constant would load scipy.stats and pandas through the
re-exports, and `fair-pipeline elicit --help` would take seconds. A package lists its exports here instead; the
names stay importable as before (`from fair_pipeline.selection import rank_candidates`)."""
from __future__ import annotations

import importlib
import sys
import types
from typing import Callable


class _ExportingPackage(types.ModuleType):
    """A package whose exported names win over its submodules of the same name (`elicitation._qpme` is the
    function, as with an eager `from .qpme import qpme`): importing a submodule sets it on its package, which
    would otherwise hide the lazily exported function for good."""

    _owners: dict[str, str]

    def __setattr__(self, name: str, value: object) -> None:
        if isinstance(value, types.ModuleType) and value.__name__ == f"{self.__name__}.{name}" and name in self._owners:
            value = getattr(importlib.import_module(self._owners[name]), name)
        super().__setattr__(name, value)


def lazy_exports(package: str, exports: dict[str, tuple[str, ...]]) -> tuple[list[str], Callable[[str], object]]:
    """`__all__` and the module-level `__getattr__` of `package`, whose names live in the modules of `exports`
    ({module: names}); a name is imported the first time it is read, then kept on the package."""
    owners = {name: module for module, names in exports.items() for name in names}
    module = sys.modules[package]
    module.__class__ = _ExportingPackage
    object.__setattr__(module, "_owners", owners)

    def __getattr__(name: str) -> object:
        if name not in owners:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(owners[name]), name)
        setattr(module, name, value)
        return value

    return sorted(owners), __getattr__
