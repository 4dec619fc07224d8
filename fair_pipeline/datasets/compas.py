"""ProPublica COMPAS two-year recidivism data, shipped under data/external/compas/.

Source, license and checksums: data/external/compas/PROVENANCE.md.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from fair_pipeline.datasets.checksums import DatasetFileError, external_root, verified_path

DATASET_DIR = "compas"
FILE = "compas-scores-two-years.csv"

# The CSV repeats two column names; pandas suffixes the second copy with ".1".
DUPLICATED_COLUMNS = ("decile_score", "priors_count")
DATE_COLUMNS = (
    "compas_screening_date", "dob", "c_jail_in", "c_jail_out", "c_offense_date", "c_arrest_date",
    "r_offense_date", "r_jail_in", "r_jail_out", "vr_offense_date", "screening_date",
    "v_screening_date", "in_custody", "out_custody",
)

# Documented sizes, public for callers that want to assert them (tests check the same numbers).
N_ROWS_RAW = 7_214
N_ROWS_FILTERED = 6_172


def load_compas(filtered: bool = True, root: Path | str | None = None) -> pd.DataFrame:
    """Load ProPublica's ``compas-scores-two-years.csv`` as a tidy DataFrame.

    Parameters
    ----------
    filtered : apply ProPublica's standard filter (their "Compas Analysis"
        notebook), keeping rows with ``-30 <= days_b_screening_arrest <= 30``
        (a missing value fails the filter, as in their R code),
        ``is_recid != -1``, ``c_charge_degree != "O"`` and
        ``score_text != "N/A"``. Filtered: 6,172 rows; unfiltered: 7,214 rows.
    root : folder holding ``compas/`` (default ``<repo>/data/external``).

    Returns
    -------
    One row per defendant (``id`` is unique) with the file's 51 distinct
    columns: the CSV lists ``decile_score`` and ``priors_count`` twice; the
    copies are checked to be identical and kept once. Key columns:
    ``two_year_recid`` (0/1 outcome), ``race``, ``sex``, ``age``,
    ``age_cat``, ``decile_score`` (1-10), ``score_text`` (Low/Medium/High),
    ``priors_count``, ``c_charge_degree`` (F/M). Date and time columns are
    parsed to datetime64; empty cells are NA. Index is 0..n-1.

    Raises DatasetFileError if the file is missing, fails its checksum, or a
    duplicated column's copies disagree.
    """
    path = verified_path(external_root(root) / DATASET_DIR, FILE)
    # Literal strings only: "N/A" in score_text is a value the filter tests for.
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    for column in DUPLICATED_COLUMNS:
        copy = f"{column}.1"
        if copy not in frame.columns:
            raise DatasetFileError(f"{path}: expected the duplicated column {column!r} twice")
        differ = frame[column].ne(frame[copy])
        if differ.any():
            raise DatasetFileError(
                f"{path}: the two {column!r} columns disagree on {int(differ.sum())} rows"
            )
        frame = frame.drop(columns=copy)
    for column in DATE_COLUMNS:
        frame[column] = pd.to_datetime(frame[column], format="ISO8601")
    if filtered:
        days = frame["days_b_screening_arrest"]
        keep = (
            days.between(-30, 30)
            & frame["is_recid"].ne(-1)
            & frame["c_charge_degree"].ne("O")
            & frame["score_text"].ne("N/A")
        )
        frame = frame.loc[keep.fillna(False)].reset_index(drop=True)
    return frame
