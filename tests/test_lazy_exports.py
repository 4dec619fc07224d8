"""Packages that import their re-exported names on first use (`fair_pipeline.lazy_exports`) still export every
name they list, each the object of its defining module, and a misspelt name still fails."""
from __future__ import annotations

import importlib

import pytest

LAZY_PACKAGES = ["fair_pipeline.selection", "fair_pipeline.selection.elicitation"]


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_listed_name_resolves_to_its_modules_object(package):
    module = importlib.import_module(package)
    assert module.__all__
    for name in module.__all__:
        value = getattr(module, name)
        assert name in vars(module)  # kept on the package after the first read
        if hasattr(value, "__module__"):  # a function or class: the one its own module defines
            assert getattr(importlib.import_module(value.__module__), name) is value
        namespace: dict = {}
        exec(f"from {package} import {name}", namespace)
        assert namespace[name] is value


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_an_unknown_name_is_an_attribute_error_naming_the_package(package):
    with pytest.raises(AttributeError, match=package.replace(".", r"\.")):
        getattr(importlib.import_module(package), "rank_candidate")
