"""A package's re-exported names, imported on first use (PEP 562 module `__getattr__`).

A package whose `__init__` imports all its modules makes every light submodule heavy: importing
`fair_pipeline.selection.elicitation.defaults` for one constant would load scipy.stats and pandas through the
re-exports, and `fair-pipeline elicit --help` would take seconds. Such a package lists its exports here instead;
the names stay importable as before (`from fair_pipeline.selection import rank_candidates`). No exported name may
also be a submodule's (implementation modules are private, `_qpme.py` exports `qpme`): importing that submodule
would set the module over the name."""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable


def lazy_exports(package: str, exports: dict[str, tuple[str, ...]]
                 ) -> tuple[list[str], Callable[[str], object], Callable[[], list[str]]]:
    """`__all__`, `__getattr__` and `__dir__` of `package`, whose names live in its submodules as `exports` lists
    them ({submodule relative to the package: names}); a name is imported the first time it is read, then kept."""
    owners = {name: f"{package}.{module}" for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> object:
        if name not in owners:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(owners[name]), name)
        vars(sys.modules[package])[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(owners))

    return sorted(owners), __getattr__, __dir__
