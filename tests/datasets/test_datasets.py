"""Shipped real datasets: documented row counts, tidy format, checksum enforcement."""
from __future__ import annotations

import shutil

import pandas as pd
import pytest

from fair_pipeline.datasets import DatasetFileError, load_adult, load_compas, write_open_bandit_landing
from fair_pipeline.datasets.checksums import expected_sums, sha256_of
from fair_pipeline.ingestion.contract import IMPRESSION_SCHEMA
from fair_pipeline.platform import settings


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
    for name in ("adult", "compas", "open_bandit"):
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


# ---------------------------------------------------------------- Open Bandit adapter
OBD_DATES = [f"2019-11-{day}" for day in range(24, 31)]
OBD_ROWS_PER_DATE = {
    "randomized": [1_484, 1_193, 1_300, 1_557, 1_612, 1_497, 1_357],
    "observational": [1_517, 1_161, 1_325, 1_594, 1_665, 1_457, 1_281],
}
OBD_LOG_OF = {"randomized": "random", "observational": "bts"}


@pytest.fixture(scope="module")
def obd_landing(tmp_path_factory):
    landing = tmp_path_factory.mktemp("landing")
    return landing, write_open_bandit_landing(landing)


def _read_source(folder):
    import pyarrow.parquet as pq

    frames = []
    for date in OBD_DATES:
        table = pq.read_table(folder / f"date={date}" / "part-0.parquet")
        frames.append(table.to_pandas().assign(_date=date))
    return pd.concat(frames, ignore_index=True)


def _raw_obd(source):
    return pd.read_csv(settings.EXTERNAL_DATA / "open_bandit" / OBD_LOG_OF[source] / "all" / "all.csv", index_col=0)


def test_obd_dates_and_row_counts(obd_landing):
    landing, summary = obd_landing
    for source, counts in OBD_ROWS_PER_DATE.items():
        dates = sorted(p.name for p in (landing / source).iterdir())
        assert dates == [f"date={d}" for d in OBD_DATES]
        frame = _read_source(landing / source)
        assert len(frame) == 10_000 == summary.sources[source].rows
        assert frame.groupby("_date").size().tolist() == counts
        # each file holds exactly the rows whose UTC serve date is its partition
        assert frame["ts"].dt.strftime("%Y-%m-%d").eq(frame["_date"]).all()
        assert summary.sources[source].dates == tuple(OBD_DATES)
    assert summary.sources["randomized"].clicks == 38
    assert summary.sources["observational"].clicks == 42


def test_obd_files_have_exactly_the_contract_schema(obd_landing):
    import pyarrow.parquet as pq

    landing, _ = obd_landing
    for source in OBD_ROWS_PER_DATE:
        for date in OBD_DATES:
            schema = pq.read_schema(landing / source / f"date={date}" / "part-0.parquet")
            assert schema.equals(IMPRESSION_SCHEMA), (source, date, schema)


def test_obd_contract_values(obd_landing):
    landing, summary = obd_landing
    random = _read_source(landing / "randomized")
    bts = _read_source(landing / "observational")
    assert set(random["policy"]) == {"shuffle"} and set(bts["policy"]) == {"production"}
    assert random["original_position"].isna().all()
    assert bts["original_position"].eq(bts["position"]).all()
    assert set(random["position"]) == set(bts["position"]) == {1, 2, 3}
    assert random["score"].eq(1 / 80).all()
    assert set(random["query_id"]) == set(bts["query_id"]) == {"obd-all"}
    # served lists: rows sharing a timestamp + user features (9 pairs in random, 1 in bts)
    assert random["request_id"].nunique() == 9_991 == summary.sources["randomized"].requests
    assert bts["request_id"].nunique() == 9_999 == summary.sources["observational"].requests
    for frame in (random, bts):
        assert not frame.duplicated(["request_id", "position"]).any()
        assert frame.groupby("request_id")["ts"].nunique().eq(1).all()
        assert frame.groupby("request_id")["item_id"].nunique().eq(frame.groupby("request_id").size()).all()


def test_obd_extras_are_keyed_one_to_one_and_nothing_is_lost(obd_landing):
    landing, _ = obd_landing
    for source in OBD_ROWS_PER_DATE:
        impressions = _read_source(landing / source)
        extras = _read_source(landing / "_extras" / source)
        assert len(extras) == len(impressions) == 10_000
        assert not extras.duplicated(["request_id", "position"]).any()
        joined = impressions.merge(extras, on=["request_id", "position", "_date"], how="outer", validate="1:1", indicator=True)
        assert joined["_merge"].eq("both").all()
        # Rebuild the original CSV from landing + extras and compare with the raw file.
        raw = _raw_obd(source)
        rebuilt = joined.set_index("obd_row").sort_index()
        assert rebuilt.index.tolist() == raw.index.tolist()
        assert (pd.to_datetime(raw["timestamp"], format="ISO8601") == rebuilt["ts"]).all()
        assert raw["item_id"].astype(str).eq(rebuilt["item_id"]).all()
        assert raw["position"].eq(rebuilt["position"]).all()
        assert raw["click"].eq(rebuilt["click"]).all()
        assert raw["propensity_score"].eq(rebuilt["score"]).all()
        for column in raw.columns.drop(["timestamp", "item_id", "position", "click"]):
            assert raw[column].eq(rebuilt[column.replace("-", "_")]).all(), column


def test_obd_items_table(obd_landing):
    import pyarrow.parquet as pq

    landing, summary = obd_landing
    items = pq.read_table(landing / "items" / "items.parquet").to_pandas()
    assert summary.n_items == 80
    assert items["item_id"].tolist() == [str(i) for i in range(80)]
    assert items["group_id"].value_counts().to_dict() == {"item_feature_0:low": 41, "item_feature_0:high": 39}
    context = pd.read_csv(settings.EXTERNAL_DATA / "open_bandit" / "random" / "all" / "item_context.csv", index_col=0)
    assert items["item_feature_0"].tolist() == context["item_feature_0"].tolist()
    high = context["item_feature_0"] > context["item_feature_0"].median()
    assert items["group_id"].eq(high.map({True: "item_feature_0:high", False: "item_feature_0:low"})).all()
    group_of = items.set_index("item_id")["group_id"]
    for source in OBD_ROWS_PER_DATE:
        frame = _read_source(landing / source)
        assert frame["group_id"].eq(frame["item_id"].map(group_of)).all()


def test_obd_rerun_is_byte_identical(obd_landing, tmp_path):
    landing, summary = obd_landing
    write_open_bandit_landing(tmp_path)
    assert len(summary.files) == 2 * 2 * 7 + 1
    for path in summary.files:
        assert (tmp_path / path.relative_to(landing)).read_bytes() == path.read_bytes(), path


def test_obd_corrupted_log_is_rejected_naming_it(tmp_path):
    shutil.copytree(settings.EXTERNAL_DATA / "open_bandit", tmp_path / "open_bandit")
    target = tmp_path / "open_bandit" / "bts" / "all" / "all.csv"
    target.write_bytes(target.read_bytes()[:-100])
    with pytest.raises(DatasetFileError, match=r"bts/all/all\.csv.*sha256"):
        write_open_bandit_landing(tmp_path / "landing", root=tmp_path)


def test_adult_unknown_label_names_file_and_line(tmp_path):
    from fair_pipeline.datasets.checksums import SUMS_FILE

    folder = tmp_path / "adult"
    shutil.copytree(settings.EXTERNAL_DATA / "adult", folder)
    lines = (folder / "adult.test").read_text().splitlines(keepends=True)
    lines[5] = lines[5].replace("<=50K.", "<=60K.").replace(">50K.", ">60K.")
    (folder / "adult.test").write_text("".join(lines))
    sums = (folder / SUMS_FILE).read_text().splitlines()
    sums = [f"{sha256_of(folder / 'adult.test')}  adult.test" if s.endswith(" adult.test") else s for s in sums]
    (folder / SUMS_FILE).write_text("\n".join(sums) + "\n")
    with pytest.raises(DatasetFileError, match=r"adult\.test:6: income label '[<>=]+60K'"):
        load_adult("test", root=tmp_path)
