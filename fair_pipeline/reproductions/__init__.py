"""Reproductions: the source papers' published tables recomputed from the shipped data, as living checks.

`kallus_zhou` reproduces Kallus & Zhou's table 1 (AUC and xAUC of a logistic regression on COMPAS and Adult,
mean of random 70/30 splits) with the audit's statistics and the loaders of `fair_pipeline.datasets`.
Inputs: data/external/. Outputs: a printed table. Run ``python -m fair_pipeline.reproductions.kallus_zhou [n_splits]``.
Tests: tests/reproductions/.
"""
