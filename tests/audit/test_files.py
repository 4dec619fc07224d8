"""audit_file: the DuckDB aggregate path gives the in-memory numbers; errors; CLI hooks."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.audit import AuditInputError, compare_groups, pairwise_accuracies, xauc
from fair_pipeline.audit.files import audit_file, quote_ident
from fair_pipeline.audit.formatting import format_audit
from fair_pipeline.commands import main

SCORE, LABEL, GROUP, QUERY = 'model "v2" score', "clicked?", "group id", "q"


def main_audit(argv: list[str]) -> int:
    return main(["audit", *argv])


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(0)
    N = 6000
    g = rng.choice(["x", "y", "z"], N)
    y = rng.random(N) < 0.3
    s = np.round(rng.normal(size=N) + y * (1 + (g == "x")), 2)
    return pd.DataFrame({SCORE: s, LABEL: y.astype(int), GROUP: g, QUERY: rng.integers(0, 400, N)})


@pytest.fixture(scope="module")
def files(frame, tmp_path_factory):
    d = tmp_path_factory.mktemp("audit files")
    pq = d / "it's scored.parquet"  # quote in the path: bound as a parameter, never spliced
    frame.to_parquet(pq)
    csv = d / "scored.csv"
    frame.to_csv(csv, index=False)
    half = len(frame) // 2
    frame.iloc[:half].to_parquet(d / "part-0.parquet")
    frame.iloc[half:].to_parquet(d / "part-1.parquet")
    return {"parquet": pq, "csv": csv, "glob": str(d / "part-*.parquet")}


def _close(a: pd.DataFrame, b: pd.DataFrame, tol=1e-12):
    x, y = a.select_dtypes("number").to_numpy(float), b.select_dtypes("number").to_numpy(float)
    assert x.shape == y.shape
    assert np.nanmax(np.abs(x - y)) <= tol
    assert (np.isnan(x) == np.isnan(y)).all()


@pytest.mark.parametrize("kind", ["parquet", "csv", "glob"])
def test_sql_path_equals_in_memory(frame, files, kind):
    r = audit_file(files[kind], SCORE, LABEL, GROUP, QUERY, batch_rows=97)  # many small batches
    s, y, g = frame[SCORE].to_numpy(), frame[LABEL].to_numpy(), frame[GROUP].to_numpy()
    ref = compare_groups(s, y, g)
    _close(r.report.groups, ref.groups)
    _close(r.report.pairs, ref.pairs)
    _close(r.report.overall, ref.overall)
    rx = xauc(s, y, g)
    for name in ("pairs", "deltas", "balanced", "balanced_deltas", "curves"):
        _close(getattr(r.report.xauc, name), getattr(rx, name))
    rp = pairwise_accuracies(s, y, g, frame[QUERY].to_numpy())
    for name in ("matrix", "marginals", "parity", "overall"):
        _close(getattr(r.pairwise, name), getattr(rp, name))
    assert r.rows == len(frame)


def test_without_group_and_boolean_labels(frame, tmp_path):
    p = tmp_path / "bool.parquet"
    frame.assign(**{LABEL: frame[LABEL].astype(bool)}).to_parquet(p)
    r = audit_file(p, SCORE, LABEL, cutoffs=[0.1, 1.0])
    assert r.report.xauc is None and r.report.pairs.empty
    assert r.report.groups["group"].eq("(all)").all()
    assert np.allclose(r.report.groups["auc"], r.report.overall["auc"])


def test_a_constant_score_is_reported_as_uninformative(frame, tmp_path):
    """Every row tied: the ROC is the diagonal, so I(a) = a^2 / 2 and McClish's standardized value is 0.5 at
    every cutoff, for every group (an earlier tie convention reported 0.744)."""
    p = tmp_path / "constant.parquet"
    frame.assign(**{SCORE: 0.5}).to_parquet(p)
    r = audit_file(p, SCORE, LABEL, GROUP, cutoffs=[0.05, 0.2, 1.0])
    groups = r.report.groups[r.report.groups["estimable"]]
    assert not groups.empty
    np.testing.assert_allclose(groups["mcclish"], 0.5, atol=1e-12)
    np.testing.assert_allclose(groups["auc"], groups["cutoff"] ** 2 / 2, atol=1e-12)


def test_json_and_text(files):
    r = audit_file(files["parquet"], SCORE, LABEL, GROUP, QUERY)
    d = json.loads(json.dumps(r.to_dict()))  # strictly JSON: no NaN, no numpy types
    assert d["rows"] == 6000 and len(d["groups"]) == 15 and d["xauc"]["deltas"]
    assert d["pairwise"]["matrix"][0]["n_pairs"] > 0
    text = format_audit(r)
    for heading in ("Per group:", "Group differences", "xAUC(a, b)", "Balanced xAUC", "pairwise accuracy"):
        assert heading in text


def test_cli_main(files, capsys):
    assert main_audit([str(files["csv"]), "--score", SCORE, "--label", LABEL, "--group", GROUP,
                       "--cutoffs", "0.1,0.2,1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cutoffs"] == [0.1, 0.2, 1.0]
    assert main_audit([str(files["csv"]), "--score", "nope", "--label", LABEL]) == 2
    err = capsys.readouterr().err
    assert "--score column 'nope' not found" in err and SCORE in err


def _bad(tmp_path, frame, **changes):
    df = frame.copy()
    for col, (rows, value) in changes.items():
        df[col] = df[col].astype(object)
        df.loc[rows, col] = value
    p = tmp_path / "bad.parquet"
    df.to_parquet(p)
    return p


def test_label_errors_are_counted_per_group_even_where_no_label_is_numeric(tmp_path):
    """Group b's labels are one non-numeric and one empty (NULL): its counts of 0s and 1s are zero, not missing,
    so its bad labels are still counted, beside group a's label 2 and the NULL group's NaN label."""
    p = tmp_path / "labels.csv"
    pd.DataFrame({"s": [1, 2, 3, 4, 5, 6], "l": ["1", "0", "x", "", "2", "nan"],
                  "g": ["a", "a", "b", "b", "a", None]}).to_csv(p, index=False)
    with pytest.raises(AuditInputError) as raised:
        audit_file(p, "s", "l", "g")
    assert str(raised.value).split(": ", 1)[1] == (
        "--group column 'g': 1 rows with NULL group; --label column 'l': 1 NULL values in group 'b'; "
        "--label column 'l': 1 not 0/1 values in group nan; --label column 'l': 1 not 0/1 values in group 'a'; "
        "--label column 'l': 1 not 0/1 values in group 'b'")


def test_errors_name_column_group_and_count(frame, tmp_path):
    y_rows = frame.index[frame[GROUP] == "y"][:3]
    p = _bad(tmp_path, frame, **{SCORE: (y_rows, None)})
    with pytest.raises(AuditInputError, match=f"--score column '{SCORE}': 3 NULL values in group 'y'"):
        audit_file(p, SCORE, LABEL, GROUP)
    p = _bad(tmp_path, frame, **{LABEL: (frame.index[:5], 2)})
    with pytest.raises(AuditInputError, match="not 0/1 values in group"):
        audit_file(p, SCORE, LABEL, GROUP)
    p = _bad(tmp_path, frame, **{GROUP: (frame.index[:4], None)})
    with pytest.raises(AuditInputError, match="4 rows with NULL group"):
        audit_file(p, SCORE, LABEL, GROUP)
    csv = tmp_path / "inf.csv"
    frame.assign(**{SCORE: np.where(frame.index == 7, np.inf, frame[SCORE])}).to_csv(csv, index=False)
    with pytest.raises(AuditInputError, match="1 NaN or infinite values in group"):
        audit_file(csv, SCORE, LABEL, GROUP)
    with pytest.raises(AuditInputError, match="no such file"):
        audit_file(tmp_path / "missing.parquet", SCORE, LABEL)
    with pytest.raises(AuditInputError, match="expected a .parquet or .csv"):
        audit_file(tmp_path / "bad.xlsx", SCORE, LABEL) if (tmp_path / "bad.xlsx").touch() is None else None
    with pytest.raises(AuditInputError, match="single class"):
        frame.assign(**{LABEL: 0}).to_parquet(tmp_path / "one.parquet")
        audit_file(tmp_path / "one.parquet", SCORE, LABEL, GROUP)
    with pytest.raises(AuditInputError, match="cutoffs must lie in"):
        audit_file(tmp_path / "one.parquet", SCORE, LABEL, cutoffs=[0, 0.5])


@pytest.mark.parametrize("bad, what", [(np.nan, "NaN or infinite"), (-np.inf, "NaN or infinite"), (None, "NULL")])
@pytest.mark.parametrize("clusters", [None, GROUP], ids=["iid", "clustered"])
def test_bad_scores_in_parquet_are_named_per_group_whatever_the_statistics(frame, tmp_path, bad, what, clusters):
    """pyarrow keeps NaN in a float column and leaves it out of the column's min/max: the scores are checked in the
    sorted stream and the detailed count runs without DuckDB's statistics propagation."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    scores = frame[SCORE].astype(object).to_numpy().copy()
    y_rows = np.flatnonzero(frame[GROUP].to_numpy() == "y")[:2]
    scores[y_rows] = bad
    table = pa.Table.from_pandas(frame.drop(columns=[SCORE]), preserve_index=False)
    table = table.append_column(SCORE, pa.array(scores.tolist(), pa.float64(), from_pandas=False))
    path = tmp_path / "nan scores.parquet"
    pq.write_table(table, path)
    with pytest.raises(AuditInputError, match=f"--score column '{SCORE}': 2 {what} values in group 'y'"):
        audit_file(path, SCORE, LABEL, GROUP, clusters=clusters)


def test_an_empty_file_or_a_header_alone_says_so(frame, tmp_path):
    empty = tmp_path / "empty.csv"
    empty.touch()
    with pytest.raises(AuditInputError, match=r"empty\.csv: the file is empty \(0 bytes\)"):
        audit_file(empty, SCORE, LABEL, GROUP)
    header = tmp_path / "header.csv"
    frame.iloc[:0].to_csv(header, index=False)
    for group in (GROUP, None):
        with pytest.raises(AuditInputError, match="no rows to audit|no observations"):
            audit_file(header, SCORE, LABEL, group)


def test_quote_ident():
    assert quote_ident('a"b') == '"a""b"'
    assert quote_ident("x; DROP TABLE t") == '"x; DROP TABLE t"'


def test_cli_margin_option_sets_the_delta_of_each_verdict(files, capsys):
    assert main_audit([str(files["csv"]), "--score", SCORE, "--label", LABEL, "--group", GROUP, "--cutoffs", "0.1,1",
                       "--margin", "xauc=0.07", "--margin", "partial_auc_normalized=0.03", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {p["margin"] for p in out["pairs"]} == {0.03} and {d["margin"] for d in out["xauc"]["deltas"]} == {0.07}
    assert {d["margin"] for d in out["xauc"]["balanced_deltas"]} == {0.02}  # not given: the default
    verdicts = {p["verdict"] for p in out["pairs"]} | {d["verdict"] for d in out["xauc"]["deltas"]}
    assert verdicts <= {"gap larger than δ (significant)", "gap significant but within ±δ",
                        "equivalent within ±δ (TOST, 95%)", "inconclusive", "not estimable"}
    assert main_audit([str(files["csv"]), "--score", SCORE, "--label", LABEL, "--group", GROUP, "--margin", "auc=0.1"]) == 2
    assert "unknown margin metric 'auc'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main_audit([str(files["csv"]), "--score", SCORE, "--label", LABEL, "--margin", "xauc"])
    assert "--margin must be METRIC=VALUE" in capsys.readouterr().err
    text = format_audit(audit_file(files["parquet"], SCORE, LABEL, GROUP, QUERY))
    assert "Effect sizes (I_a - I_b)/cutoff against the margin δ" in text and "verdict" in text
    assert "Cross-group gaps A_{a>b} - A_{b>a}" in text
