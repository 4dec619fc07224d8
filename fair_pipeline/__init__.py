"""fair_pipeline: end-to-end fair ranking on Dagster + DuckDB + MLflow.

One package per pipeline stage (see each package's tour): charts (figures), platform, ingestion, datasets, position_bias, eo,
training, audit, selection, reporting, reproductions; `commands` is the `fair-pipeline` command line.
"""
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

__version__ = "0.1.0"

# The pipeline sends no usage data anywhere: Dagster's telemetry is off in the dagster.yaml it writes, MLflow's
# here (MLflow reads the variable when it is imported; an explicit setting of the user's wins).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

# Module paths that models registered by earlier versions name in their pickles (the fair-ranker pyfunc, its base
# ranker and fitted transform, logged before the stage packages). Only unpickling old registry versions uses them;
# None is the empty parent package of such a path.
_PICKLED_MODULES = {
    "fair_pipeline.serving": "fair_pipeline.eo.serving",
    "fair_pipeline.core": None,
    "fair_pipeline.core.eo_transform": "fair_pipeline.eo.transform",
    "fair_pipeline.core.piecewise": "fair_pipeline.eo.piecewise",
}


class _PickledModuleAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in _PICKLED_MODULES else None

    def create_module(self, spec):
        target = _PICKLED_MODULES[spec.name]
        if target is None:
            module = importlib.util.module_from_spec(importlib.machinery.ModuleSpec(spec.name, None, is_package=True))
            module.__path__ = []
            return module
        return importlib.import_module(target)

    def exec_module(self, module):
        pass


if not any(isinstance(finder, _PickledModuleAlias) for finder in sys.meta_path):
    sys.meta_path.append(_PickledModuleAlias())
