"""Shipped real datasets: documented row counts, tidy format, checksum enforcement."""
from __future__ import annotations

import shutil

import pandas as pd
import pytest

from fair_pipeline import settings
from fair_pipeline.datasets import DatasetFileError, load_adult, load_compas
from fair_pipeline.datasets.checksums import expected_sums, sha256_of


@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    return load_adult("all")


@pytest.fixture(scope="module")
def compas() -> pd.DataFrame:
    return load_compas(filtered=True)


# ---------------------------------------------------------------- Adult
def test_adult_documented_row_counts(adult):
    assert len(load_adult("train")) == 32_561
    assert len(load_adult("test")) == 16_281
    assert len(adult) == 32_561 + 16_281
    assert adult["split"].value_counts().to_dict() == {"train": 32_561, "test": 16_281}


def test_adult_labels_are_tidy(adult):
    # adult.test writes "<=50K." / ">50K."; the dot must not create extra classes.
    assert set(adult["income"].unique()) == {"<=50K", ">50K"}
    assert adult["income_gt_50k"].dtype == "int64"
    assert adult["income_gt_50k"].eq(adult["income"].eq(">50K").astype(int)).all()
    # Published class balance: 7,841 / 32,561 and 3,846 / 16,281 earn >50K.
    assert adult.groupby("split")["income_gt_50k"].sum().to_dict() == {"train": 7_841, "test": 3_846}


def test_adult_missing_values_and_whitespace(adult):
    # '?' becomes NA; the complete-case counts are the widely quoted 30,162 / 15,060.
    complete = adult.dropna().groupby("split").size().to_dict()
    assert complete == {"train": 30_162, "test": 15_060}
    assert adult.isna().sum()[lambda s: s > 0].to_dict() == {
        "workclass": 2_799, "occupation": 2_809, "native_country": 857,
    }
    for column in adult.select_dtypes(include=["object", "string"]).columns:
        values = adult[column].dropna()
        assert not values.eq("?").any(), column
        assert values.eq(values.str.strip()).all(), column
    assert adult["sex"].value_counts().to_dict() == {"Male": 32_650, "Female": 16_192}
    assert adult["age"].dtype == "int64" and adult["age"].between(17, 90).all()


def test_adult_rejects_unknown_split():
    with pytest.raises(ValueError, match="split"):
        load_adult("validation")


# ---------------------------------------------------------------- COMPAS
def test_compas_documented_row_counts(compas):
    assert len(compas) == 6_172
    assert len(load_compas(filtered=False)) == 7_214


def test_compas_filter_and_columns(compas):
    assert compas["id"].is_unique
    assert compas["days_b_screening_arrest"].between(-30, 30).all()
    assert compas["is_recid"].ne(-1).all()
    assert set(compas["c_charge_degree"]) == {"F", "M"}
    assert set(compas["score_text"]) == {"Low", "Medium", "High"}
    assert not any(c.endswith(".1") for c in compas.columns)
    assert len(compas.columns) == 51
    assert pd.api.types.is_datetime64_any_dtype(compas["c_jail_in"])


def test_compas_matches_propublica_published_counts(compas):
    # Figures printed in ProPublica's "Compas Analysis" notebook after the standard filter.
    assert compas["race"].value_counts().to_dict() == {
        "African-American": 3_175, "Caucasian": 2_103, "Hispanic": 509,
        "Other": 343, "Asian": 31, "Native American": 11,
    }
    assert compas["sex"].value_counts().to_dict() == {"Male": 4_997, "Female": 1_175}
    assert compas["score_text"].value_counts().to_dict() == {"Low": 3_421, "Medium": 1_607, "High": 1_144}
    assert int(compas["two_year_recid"].sum()) == 2_809


# ---------------------------------------------------------------- checksums
def test_shipped_files_match_their_checksums():
    for name in ("adult", "compas"):
        folder = settings.EXTERNAL_DATA / name
        sums = expected_sums(folder)
        assert sums, name
        for relative, digest in sums.items():
            assert sha256_of(folder / relative) == digest, relative
        assert (folder / "PROVENANCE.md").is_file()


def test_modified_file_is_rejected_naming_it(tmp_path):
    shutil.copytree(settings.EXTERNAL_DATA / "compas", tmp_path / "compas")
    target = tmp_path / "compas" / "compas-scores-two-years.csv"
    data = bytearray(target.read_bytes())
    data[-3] = ord("0") if data[-3] != ord("0") else ord("1")
    target.write_bytes(bytes(data))
    with pytest.raises(DatasetFileError, match="compas-scores-two-years.csv.*sha256"):
        load_compas(root=tmp_path)


def test_missing_file_is_rejected_naming_it(tmp_path):
    shutil.copytree(settings.EXTERNAL_DATA / "adult", tmp_path / "adult")
    (tmp_path / "adult" / "adult.test").unlink()
    assert len(load_adult("train", root=tmp_path)) == 32_561
    with pytest.raises(DatasetFileError, match=r"adult\.test is missing"):
        load_adult("all", root=tmp_path)
