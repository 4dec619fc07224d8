"""UCI Adult (1994 US Census extract), shipped under data/external/adult/.

Source, license and checksums: data/external/adult/PROVENANCE.md.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from fair_pipeline.datasets.checksums import DatasetFileError, external_root, verified_path

DATASET_DIR = "adult"
SPLIT_FILES = {"train": "adult.data", "test": "adult.test"}
# adult.test opens with the line "|1x3 Cross validator"; adult.data has no header.
_SKIP_ROWS = {"train": 0, "test": 1}

NUMERIC_COLUMNS = ("age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week")
CATEGORICAL_COLUMNS = (
    "workclass", "education", "marital_status", "occupation",
    "relationship", "race", "sex", "native_country",
)
RAW_COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation",
    "relationship", "race", "sex", "capital_gain", "capital_loss", "hours_per_week",
    "native_country", "income",
)
LABEL = "income_gt_50k"
INCOME_LABELS = {"<=50K": 0, ">50K": 1}

# Documented sizes, public for callers that want to assert them (tests check the same numbers).
N_ROWS = {"train": 32_561, "test": 16_281}


def load_adult(split: str = "all", root: Path | str | None = None) -> pd.DataFrame:
    """Load UCI Adult as a tidy DataFrame.

    Parameters
    ----------
    split : "all" | "train" | "test"
        ``train`` is ``adult.data`` (32,561 rows), ``test`` is ``adult.test``
        (16,281 rows), ``all`` concatenates them (48,842 rows), train first.
    root : folder holding ``adult/`` (default ``<repo>/data/external``).

    Returns
    -------
    DataFrame with one row per person and columns, in order:
    ``age, workclass, fnlwgt, education, education_num, marital_status,
    occupation, relationship, race, sex, capital_gain, capital_loss,
    hours_per_week, native_country`` (snake_case names from adult.names),
    ``income`` (``"<=50K"`` / ``">50K"``; the trailing ``"."`` that adult.test
    puts on its labels is removed), ``income_gt_50k`` (int 0/1) and ``split``
    (``"train"`` / ``"test"``). Strings are stripped; the census ``"?"``
    (unknown) is NA. No row is dropped: 2,399 train and 1,221 test rows have
    at least one NA in workclass / occupation / native_country (30,162 and
    15,060 complete rows, the counts most papers quote after ``dropna()``).
    Numeric columns are int64.

    Raises DatasetFileError if a file is missing or fails its checksum, and
    ValueError naming the file and line if a label is not one of the two
    income classes.
    """
    if split == "all":
        splits = ("train", "test")
    elif split in SPLIT_FILES:
        splits = (split,)
    else:
        raise ValueError(f"split must be 'all', 'train' or 'test', got {split!r}")
    dataset_dir = external_root(root) / DATASET_DIR
    frames = [_read_split(dataset_dir, name) for name in splits]
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def _read_split(dataset_dir: Path, split: str) -> pd.DataFrame:
    path = verified_path(dataset_dir, SPLIT_FILES[split])
    frame = pd.read_csv(
        path,
        header=None,
        names=list(RAW_COLUMNS),
        skiprows=_SKIP_ROWS[split],
        skipinitialspace=True,
        na_values=["?"],
        keep_default_na=False,
        dtype={c: "int64" for c in NUMERIC_COLUMNS},
        index_col=False,
    )
    for column in (*CATEGORICAL_COLUMNS, "income"):
        frame[column] = frame[column].str.strip()
    frame["income"] = frame["income"].str.rstrip(".")
    unknown = ~frame["income"].isin(list(INCOME_LABELS))
    if unknown.any():
        row = int(unknown.idxmax())
        # +1 for 1-based lines, plus the skipped header line of adult.test.
        line = row + 1 + _SKIP_ROWS[split]
        raise DatasetFileError(
            f"{path}:{line}: income label {frame['income'].iloc[row]!r} is not one of "
            f"{sorted(INCOME_LABELS)} ({int(unknown.sum())} such rows)"
        )
    frame[LABEL] = frame["income"].map(INCOME_LABELS).astype("int64")
    frame["split"] = split
    return frame
