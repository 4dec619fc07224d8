"""Packages that import their re-exported names on first use (PEP 562 `__getattr__`, `fair_pipeline.lazy_exports`)
still export every name they list, each the object of its defining module, also after every submodule is imported;
no exported name is also a submodule's (`_qpme.py` exports `qpme`), so importing a submodule never hides an export;
the package module stays a plain module; and a misspelt name still fails."""
from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import types

import pytest

LAZY_PACKAGES = ["fair_pipeline.selection", "fair_pipeline.selection.elicitation"]


def _exported_objects(package: str) -> dict[str, object]:
    module = importlib.import_module(package)
    return {name: getattr(module, name) for name in module.__all__}


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_listed_name_resolves_to_its_modules_object_before_and_after_every_submodule_import(package):
    # In a fresh interpreter: here other tests have imported the submodules already.
    code = f"""
import importlib, pkgutil, types
package = importlib.import_module({package!r})
first = {{name: getattr(package, name) for name in package.__all__}}
for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
    importlib.import_module(info.name)
for name, value in first.items():
    assert not isinstance(value, types.ModuleType), name
    assert getattr(package, name) is value, name
    namespace = {{}}
    exec(f"from {package} import {{name}}", namespace)
    assert namespace[name] is value, name
print(len(first))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == len(importlib.import_module(package).__all__) > 0


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_names_are_the_defining_modules_objects_in_this_process(package):
    for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
        importlib.import_module(info.name)
    for name, value in _exported_objects(package).items():
        assert not isinstance(value, types.ModuleType), name
        if hasattr(value, "__module__"):  # a function or class: the one its own module defines
            assert getattr(importlib.import_module(value.__module__), name) is value


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_no_exported_name_is_a_submodule_name_and_the_package_is_a_plain_module(package):
    module = importlib.import_module(package)
    submodules = {info.name.rpartition(".")[2] for info in pkgutil.iter_modules(module.__path__)}
    assert not submodules & set(module.__all__)
    assert type(module) is types.ModuleType


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_an_unknown_name_is_an_attribute_error_naming_the_package(package):
    with pytest.raises(AttributeError, match=package.replace(".", r"\.")):
        getattr(importlib.import_module(package), "rank_candidate")
