"""Every command written in docs/*.md is executed by a test (the README's: tests/e2e/test_readme.py).

A command is a line of a ```bash block, or an inline `span` that starts with a program (`fair-pipeline`,
`python`, `pytest`, `dagster`, `duckdb`, `mlflow`, optionally after `VAR=value` assignments and `.venv/bin/`)
followed by an argument. `test_every_docs_command_is_accounted_for` fails on a command that is in none of the
tables below, so a new command in the docs needs a test before it can be merged.

- RUN_AS_WRITTEN: run here verbatim from the repository root (`python` and `.venv/bin/` are this interpreter's),
  with `FAIR_PIPELINE_HOME` in a temp directory.
- SMALLER: benchmarks and reproductions whose documented size takes minutes to hours; they run here with the
  documented arguments followed by smaller sizes (argparse keeps the last value of an option), so the script, its
  options and its output format are exercised; the documented figures come from the documented command.
- ELSEWHERE: commands another test runs (the README's, the UI, the suite itself), with that test's name, which
  must exist.
- A span that only names a subcommand (`fair-pipeline audit`) runs as `fair-pipeline audit --help`.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_readme import readme_commands

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PROGRAM = re.compile(r"^(?:[A-Z_]+=\S+ )*(?:\.venv/bin/)?(?:fair-pipeline|python|pytest|dagster|duckdb|mlflow) \S")

RUN_AS_WRITTEN = {
    "fair-pipeline simulate --help",
    "fair-pipeline audit --help",
    "fair-pipeline simulate --start 2026-01-01 --days 7 --requests-per-day 25000",
    "fair-pipeline audit data/external/compas/compas-scores-two-years.csv --score decile_score --label two_year_recid "
    "--group race --cluster id --cutoffs 0.05,0.1,0.2,0.5,1 --margin xauc=0.03 --json",
    "fair-pipeline promote --partition 2026-01-03",  # on an empty home: the one-line refusal (exit 2)
    "python -m pytest tests/test_shared_home.py --randomly-seed=1234",
    "python -m pytest tests/test_shared_home.py -n 0 -p no:randomly",
}
EXIT_CODES = {"fair-pipeline promote --partition 2026-01-03": 2}

SMALLER = {
    "python benchmarks/audit_coverage.py": "--reps 4 --items 200 --jobs 1 --truth-factor 2",
    "python benchmarks/exposure_coverage.py --reps 500": "--reps 2 --jobs 1 --truth-chunks 1",
    "python benchmarks/exposure_small_sample_coverage.py --reps 400":
        "--reps 3 --jobs 1 --truth-reps 3 --config '25 items, uniform popularity'",
    "python benchmarks/exposure_small_sample_coverage.py --reps 400 --seed 7":
        "--reps 3 --jobs 1 --truth-reps 3 --config 'hidden 2: 35 items, uniform, 7 slots, groups 60/22/18%'",
    "python benchmarks/exposure_paired_coverage.py --reps 400 --jobs 1 --truth-reps 400": "--reps 3 --truth-reps 3",
    "python benchmarks/selection_rate_coverage.py --reps 200 --rows selection_pareto1.3_2000 --seed 0": "--reps 2",
    "python benchmarks/selection_rate_coverage.py --reps 200 --seed 23": "--reps 1",
    "python benchmarks/exposure_paired_coverage.py --reps 400 --jobs 1 --truth-reps 400 --seed 13":
        "--reps 3 --truth-reps 3",
    "python benchmarks/exposure_df_rules.py --reps 400":
        "--reps 2 --jobs 1 --truth-reps 2 --config '25 items, uniform popularity'",
    "python benchmarks/exposure_small_sample_coverage.py --reps 1000 --seed 11 --jobs 1 --config '25 items, uniform "
    "popularity'": "--reps 3 --truth-reps 3",
    "python benchmarks/exposure_small_sample_coverage.py --reps 1000 --seed 11 --jobs 1 --config 'hidden 2: 35 items, "
    "uniform, 7 slots, groups 60/22/18%'": "--reps 3 --truth-reps 3",
    "python benchmarks/exposure_small_sample_coverage.py --reps 1000 --seed 11 --jobs 1 --config 'hidden 2: 500 items, "
    "log-normal σ=1, 12 slots, small group 4%'": "--reps 3 --truth-reps 3",
    "python benchmarks/exposure_small_sample_coverage.py --reps 1000 --seed 11 --jobs 1 --config '40 items, Pareto 1.1 "
    "popularity, small group 10%'": "--reps 3 --truth-reps 3",
    "python benchmarks/exposure_small_sample_coverage.py --reps 1000 --seed 31 --jobs 1 --config 'hidden 2: 500 items, "
    "log-normal σ=1, 12 slots, small group 4%'": "--reps 3 --truth-reps 3",
    "python benchmarks/exposure_small_sample_coverage.py --reps 1000 --seed 31 --jobs 1 --config '40 items, Pareto 1.1 "
    "popularity, small group 10%'": "--reps 3 --truth-reps 3",
    "python benchmarks/exposure_small_sample_coverage.py --reps 1000 --seed 41 --jobs 1 --config '300 items, "
    "log-normal σ=2, small group 5%' --config 'hidden 2: 500 items, log-normal σ=1, 12 slots, small group 4%' "
    "--config '40 items, Pareto 1.1 popularity, small group 10%'": "--reps 3 --truth-reps 3",
    "python benchmarks/exposure_df_diagnosis.py --reps 400 --seed 0 --seed 7 --jobs 1":
        "--reps 2 --truth-reps 2 --config '25 items, uniform popularity'",
    "python benchmarks/exposure_df_diagnosis.py --reps 400 --seed 11 --seed 31 --seed 41 --jobs 1":
        "--reps 2 --truth-reps 2 --config '25 items, uniform popularity'",
    "python benchmarks/exposure_variance_rules.py --reps 300 --jobs 1":
        "--reps 2 --truth-reps 2 --config '25 items, uniform popularity'",
    "python benchmarks/bench_clustered_audit.py --rows 1e6 --rounds 3": "--rows 1e4 --rounds 1",
    "python benchmarks/bench_clustered_audit.py --rows 1e7 --rounds 3 --no-two-way": "--rows 1e4 --rounds 1",
    "python benchmarks/bench_pairwise_cost.py --rows 1e6 --rounds 3": "--rows 3000 --rounds 1",
    "python benchmarks/cluster_inference_coverage.py --rows pairwise_fresh --reps 300 --jobs 1": "--reps 2",
    "python benchmarks/bench_audit_sql_path.py": "--rows 1e4 --rounds 1",
    "python benchmarks/bench_audit_choice.py --rows 1e7 --rounds 2": "--rows 1e4 --rounds 1",
    "python benchmarks/bench_audit.py": "--rows 1e4 --rounds 1 --boot-resamples 1 --sql-rows 1e4",
    "python benchmarks/bench_audit_groups.py": "--groups 3,5 --rows 2000",
    "python benchmarks/bench_audit_groups.py --groups 5000 --all-up-to 0": "--groups 12 --rows 2000",
    "python benchmarks/bench_candidates.py": "--impressions 100000 --repeats 1",
    "python benchmarks/bench_exposure_totals.py --requests 5000 --candidates 44": "--requests 200 --candidates 3",
    "python benchmarks/bench_main_job.py --sizes 25000 100000 250000 --days 3 --top 6": "--sizes 300 --days 2 --top 2",
    "python benchmarks/bench_noop_run.py --days 4 --requests-per-day 1000": "--days 2 --requests-per-day 200",
    "python benchmarks/bench_ingestion.py --days 2 --repeats 5": "--days 1 --repeats 1 --requests-per-day 200",
    "python benchmarks/bench_eo_transform.py": "100000",
    "python -m fair_pipeline.reproductions.kallus_zhou 20": None,  # the positional count: replaced below
    "python benchmarks/position_bias_accuracy.py": "--bin-reps 1 --coverage-reps 1",
    "python benchmarks/bench_position_bias.py": "--impressions 1e4 --repeat 1",
    "python -m benchmarks.elicitation_evidence": "--metrics 3",
    "python -m benchmarks.elicitation_interactive --truths 10 --qpme-truths 3": "--truths 1 --qpme-truths 1",
    "python benchmarks/bench_penalized.py --repeats 5 --parts objective,fits,path": "--repeats 1",
    "python benchmarks/penalized_reproduction.py": "",
    "python benchmarks/postprocessing_comparison.py": "--tables A",
    "python benchmarks/landing_fuzz.py --days 500": "--days 20",
    "python benchmarks/cluster_inference_coverage.py": "--reps 2 --jobs 1 --rows pareto1.3,pairwise_fresh",
    "python benchmarks/cluster_inference_coverage.py --reps 200 --rows pareto1.1,minority45_pareto1.3,minority45 --jobs 1":
        "--reps 1",
    "python benchmarks/cluster_inference_coverage.py --reps 600 --rows minority45_pareto1.3,minority30 --jobs 1 --seed 7":
        "--reps 1",
    "python benchmarks/cluster_inference_coverage.py --reps 500 --jobs 1 --seed 11 --rows pareto1.1,pareto1.3,"
    "minority45_pareto1.3,query_pareto1.3": "--reps 1",
    "python benchmarks/cluster_inference_coverage.py --rows rates_pareto1.3,rates_minority45 --reps 500 --jobs 1 --seed 0":
        "--reps 1",
    "python benchmarks/cluster_inference_coverage.py --rows rates_pareto1.3,rates_minority45 --reps 500 --jobs 1 --seed 7":
        "--reps 1",
    "python benchmarks/cluster_inference_coverage.py --rows rates_pareto1.3,rates_minority45,selection_pareto1.3,"
    "selection_minority45_pareto1.3,selection_pareto1.3_2000,selection_pareto1.3_4000 --reps 500 --jobs 2 --seed 0":
        "--reps 1 --jobs 1",
    "python benchmarks/cluster_inference_coverage.py --rows rates_pareto1.3,rates_minority45,selection_pareto1.3,"
    "selection_minority45_pareto1.3 --reps 500 --jobs 1 --seed 7": "--reps 1",
    "python benchmarks/cluster_inference_coverage.py --rows selection_pareto1.3_2000,selection_pareto1.3 --reps 300 "
    "--jobs 1 --seed 11": "--reps 1",
    "python benchmarks/cluster_inference_coverage.py --rows selection_pareto1.3_2000,selection_pareto1.3_4000 --reps 300 "
    "--jobs 1 --seed 12": "--reps 1",
    "python benchmarks/cluster_inference_coverage.py --rows selection_pareto1.3_2000,selection_pareto1.3_4000 --reps 250 "
    "--jobs 1 --seed 0": "--reps 1",
    "python benchmarks/position_bias_accuracy.py --only-swap --swap-reps 500": "--swap-reps 2",
    "python benchmarks/cluster_inference_coverage.py --rows pareto1.1,pareto1.3,pareto1.5,pareto2.5,minority30,minority45,"
    "minority60,minority45_pareto1.3,query_pareto1.3,pairwise_fresh,rates_pareto1.3,rates_minority45 --reps 500 --jobs 1 "
    "--seed 0": "--reps 1 --rows pareto1.3",
    "python benchmarks/cluster_inference_coverage.py --rows minority45_pareto1.3 --reps 500 --jobs 1 --seed 3": "--reps 1",
    "python benchmarks/cluster_inference_coverage.py --rows minority45_pareto1.3 --reps 500 --jobs 1 --seed 23": "--reps 1",
    "python benchmarks/cluster_inference_coverage.py --rows minority45_pareto1.3 --reps 500 --jobs 1 --seed 41": "--reps 1",
    "python benchmarks/wild_bootstrap_coverage.py --rows pareto1.3,minority45_pareto1.3,pareto1.1 --reps 150 --seed 3":
        "--reps 1 --rows pareto1.3",
    "python benchmarks/skewness_corrected_coverage.py --rows pareto1.1,pareto1.3,pareto1.5,query_pareto1.3,"
    "minority45_pareto1.3,pareto2.5,minority60 --reps 300 --seed 0": "--reps 1 --rows pareto1.3",
    "python benchmarks/skewness_corrected_coverage.py --rows pareto1.1,pareto1.3,pareto1.5,query_pareto1.3,"
    "minority45_pareto1.3,pareto2.5,minority60 --reps 300 --seed 3": "--reps 1 --rows pareto1.3",
    "python benchmarks/effective_clusters_rule.py --seed 0 --detail df_design:4,df:3": "--reps 1 --rows pareto1.3",
    "python benchmarks/effective_clusters_rule.py --seed 11 --detail df_design:4,df:3": "--reps 1 --rows pareto1.3",
    "python benchmarks/effective_clusters_rule.py --seed 41 --detail df_design:4,df:3": "--reps 1 --rows pareto1.3",
    "python benchmarks/tail_index_rule.py --rows pareto1.1,pareto1.3,pareto1.5,pareto2.5,minority45_pareto1.3,"
    "query_pareto1.3 --reps 250 --seed 3": "--reps 1 --rows pareto1.3",
    "python benchmarks/tail_index_rule.py --rows pareto1.1,pareto1.3,pareto1.5,pareto2.5,minority45_pareto1.3,"
    "query_pareto1.3 --reps 250 --seed 0": "--reps 1 --rows pareto1.3",
    "python benchmarks/tail_index_rule.py --rows pareto1.1,pareto1.3,pareto1.5,pareto2.5,minority45_pareto1.3,"
    "query_pareto1.3 --reps 250 --seed 11": "--reps 1 --rows pareto1.3",
    "python benchmarks/tail_index_rule.py --rows pareto1.1,pareto1.3,pareto1.5,pareto2.5,minority45_pareto1.3,"
    "query_pareto1.3 --reps 250 --seed 41": "--reps 1 --rows pareto1.3",
}
REPLACED = {"python -m fair_pipeline.reproductions.kallus_zhou 20": "python -m fair_pipeline.reproductions.kallus_zhou 2"}

ELSEWHERE = {
    "fair-pipeline run": "tests/e2e/test_readme.py::test_every_readme_command_runs",
    "fair-pipeline simulate --start 2026-01-01 --days 3 --requests-per-day 300":
        "tests/e2e/test_readme.py::test_every_readme_command_runs",
    "fair-pipeline backfill --start 2026-01-01 --end 2026-01-03": "tests/e2e/test_readme.py::test_every_readme_command_runs",
    "fair-pipeline run --start 2026-01-01 --days 7": "tests/e2e/test_docs_commands.py::test_the_documented_week_run",
    "python benchmarks/selection_week_table.py": "tests/e2e/test_docs_commands.py::test_the_documented_week_run",
    "fair-pipeline run --no-simulate": "tests/e2e/test_main_job.py::test_open_bandit_sample_is_ingested_into_seven_partitions",
    "fair-pipeline import-open-bandit && fair-pipeline run --no-simulate":
        "tests/e2e/test_main_job.py::test_open_bandit_sample_is_ingested_into_seven_partitions",
    "fair-pipeline import-open-bandit --campaign every && fair-pipeline run --no-simulate":
        "tests/e2e/test_open_bandit_campaigns.py::test_every_campaign_runs_end_to_end",
    "python -m fair_pipeline.reproductions.open_bandit_exposure":
        "tests/datasets/test_open_bandit_campaigns.py::test_the_documented_exposure_study_reproduces",
    "fair-pipeline ui": "tests/e2e/test_browser.py::test_ui_serves_both_on_the_requested_ports",
    "python -m pytest tests/eo/test_evaluation.py": "tests/eo/test_evaluation.py",
    "python -m pytest tests/platform/spark/test_engine_run.py -n 0 -p no:randomly": "tests/platform/spark/test_engine_run.py",
    "python -m pytest tests/platform/spark/test_storage_on_cluster.py -n 0 -p no:randomly":
        "tests/platform/spark/test_storage_on_cluster.py",
    "pytest -m browser": "tests/e2e/test_browser.py",
    "python -m pytest tests/platform/spark": "tests/platform/spark/test_parity.py",
    # Both engines from the same landing files; the Spark run with the same options on a standalone cluster's master.
    "fair-pipeline run --engine spark --spark-master local[2] --no-simulate":
        "tests/platform/spark/test_engine_run.py::test_the_main_job_on_a_standalone_cluster_is_measured_and_gives_duckdbs_findings",
    # The same options, with the test module's own master URL and a file:// warehouse outside the home.
    "fair-pipeline run --engine spark --spark-master spark://127.0.0.1:7077 --spark-warehouse file:///shared/fair_pipeline/spark_warehouse --no-simulate":
        "tests/platform/spark/test_engine_run.py::test_the_main_job_on_a_standalone_cluster_is_measured_and_gives_duckdbs_findings",
    # At one small size on the test module's standalone cluster: its main job is the one compared with DuckDB's.
    "python benchmarks/bench_spark_cluster.py --impressions 1e6,2e7":
        "tests/platform/spark/test_engine_run.py::test_the_main_job_on_a_standalone_cluster_is_measured_and_gives_duckdbs_findings",
    # The same test then measures the EO and selection steps again on the home its main job left.
    "python benchmarks/bench_spark_cluster.py --impressions 1e6,2e7 --work-dir DIR --steps eo,selection":
        "tests/platform/spark/test_engine_run.py::test_the_main_job_on_a_standalone_cluster_is_measured_and_gives_duckdbs_findings",
    # Logs of 5 and 20 commits in the shared SparkSession.
    "python benchmarks/bench_commit_log.py --commits 100,1000,3000 --repeats 3":
        "tests/platform/spark/test_bench_commit_log.py::test_the_commit_log_benchmark_runs_small_in_the_shared_session",
    # Both passes at 2e4 and 2e5 rows on the test module's standalone cluster, asserting the driver-bound bytes stay flat.
    "python benchmarks/bench_spark_audit.py --rows 1e6,2e7 --passes audit":
        "tests/platform/spark/test_spark_audit_driver.py::test_bytes_returned_to_the_driver_do_not_grow_with_the_days_rows",
    "python benchmarks/bench_spark_audit.py --rows 1e5,1e6 --passes pairwise":
        "tests/platform/spark/test_spark_audit_driver.py::test_bytes_returned_to_the_driver_do_not_grow_with_the_days_rows",
    # At a smaller size with the shared session's master only (a second master would stop the shared session).
    "python benchmarks/bench_engines.py --impressions 1e7 --repeats 3 --masters local[1],local[2] --driver-memory 4g":
        "tests/platform/spark/test_bench_engines.py::test_the_engine_benchmark_runs_small_in_the_shared_session",
    # In the Spark tests' one SparkSession (a subprocess would start a second JVM), at a smaller size.
    "python benchmarks/bench_engines.py --impressions 1e6 --repeats 3":
        "tests/platform/spark/test_bench_engines.py::test_the_engine_benchmark_runs_small_in_the_shared_session",
    # The same script with the same options as the three-size command, whose smaller run (--sizes 300 --days 2
    # --top 2, the last values win) is this one's too: one run of several minutes' worth of Dagster runs, not two.
    "python benchmarks/bench_main_job.py --sizes 25000 --days 3 --top 12":
        "tests/e2e/test_docs_commands.py::test_benchmark_runs_with_smaller_sizes",
    # Interactive: a scripted person answers it (same arguments) on a small warehouse of candidates.
    "fair-pipeline elicit --partition latest":
        "tests/selection/test_elicit_candidates.py::test_candidates_stop_the_questions_earlier_in_the_hidden_metrics_order_and_replay_identically",
    # Each point costs a killed run and a recovery run (about 30 s here): the test runs three of its points.
    "python -m benchmarks.kill_points --points 20":
        "tests/platform/test_kill_recovery.py::test_run_recovers_after_kill_in_sql_model_audit_and_selection_steps",
}


def docs_commands(docs: Path = REPO / "docs") -> list[tuple[str, str]]:
    """(file name, command) for every ```bash line and every inline command span of the docs, in order."""
    found = []
    for path in sorted(docs.glob("*.md")):
        text = path.read_text()
        for block in re.findall(r"```bash\n(.*?)```", text, re.S):
            found += [(path.name, line.strip()) for line in block.splitlines() if line.strip() and not line.startswith("#")]
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        found += [(path.name, span) for span in re.findall(r"`([^`\n]+)`", prose) if PROGRAM.match(span)]
    return found


def _without_comment(command: str) -> str:
    return command.split(" # ")[0].strip()


def _subcommand_reference(command: str) -> bool:
    return re.fullmatch(r"fair-pipeline [a-z-]+", command) is not None and command not in ELSEWHERE


def test_every_docs_command_is_accounted_for():
    commands = {_without_comment(c) for _, c in docs_commands()}
    assert len(commands) >= 20  # the extraction still finds the docs' commands
    unaccounted = {c for c in commands if not (c in RUN_AS_WRITTEN or c in SMALLER or c in ELSEWHERE or _subcommand_reference(c))}
    assert not unaccounted, f"docs commands no test runs: {sorted(unaccounted)}"
    readme = set(readme_commands())
    readme |= {c.replace(".venv/bin/", "") for c in readme}
    for command, test in ELSEWHERE.items():
        path, _, name = test.partition("::")
        assert (REPO / path).exists() and (not name or f"def {name}(" in (REPO / path).read_text()), f"{command!r}: {test} is gone"
        if path == "tests/e2e/test_readme.py":
            assert command in readme, f"{command!r} is not a README command"


def _shell(command: str, home: Path) -> subprocess.CompletedProcess:
    """`command` as a bash line from the repository root: `python`, `pytest` and `fair-pipeline` (bare or after
    `.venv/bin/`) are this interpreter's."""
    words = []
    for word in shlex.split(command, posix=False):
        program = word.removeprefix(".venv/bin/")
        if program in ("python", "fair-pipeline"):
            word = str(sys.executable if program == "python" else BIN / program)
        words.append(word)
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "MLFLOW_TRACKING_URI")}
    env["FAIR_PIPELINE_HOME"] = str(home)
    return subprocess.run(["bash", "-c", " ".join(words)], cwd=REPO, env=env, capture_output=True, text=True, timeout=1500)


def _check(command: str, result: subprocess.CompletedProcess, expected: int = 0) -> None:
    assert result.returncode == expected, (
        f"{command!r} exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


def _documented(table) -> list[str]:
    documented = {_without_comment(c) for _, c in docs_commands()}
    return [c for c in sorted(table) if c in documented]


@pytest.mark.slow
@pytest.mark.parametrize("command", _documented(RUN_AS_WRITTEN))
def test_command_runs_as_written(command, tmp_path):
    _check(command, _shell(command, tmp_path / "home"), EXIT_CODES.get(command, 0))


@pytest.mark.slow
@pytest.mark.parametrize("command", _documented(SMALLER))
def test_benchmark_runs_with_smaller_sizes(command, tmp_path):
    smaller = f"{REPLACED.get(command, command)} {SMALLER[command] or ''}".strip()
    result = _shell(smaller, tmp_path / "home")
    _check(smaller, result)
    assert result.stdout.strip(), f"{smaller!r} printed nothing"


# A subcommand whose `--help` the docs also write out runs once, as written (test_command_runs_as_written).
@pytest.mark.parametrize("command", sorted({c for _, c in docs_commands() if _subcommand_reference(c)
                                            and f"{c} --help" not in _documented(RUN_AS_WRITTEN)}))
def test_named_subcommand_exists(command, tmp_path):
    _check(command, _shell(f"{command} --help", tmp_path / "home"))


def _ratio(evaluation, method: str) -> float:
    rows = evaluation[evaluation["method"] == method].set_index("group")["exposure_over_merit"]
    return rows["0"] / rows["1"]


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_the_documented_week_run(tmp_path):
    """`fair-pipeline run --start 2026-01-01 --days 7` as written, and the figures docs/eo.md, docs/training.md and
    docs/selection.md quote from it are the ones it produces (same seed, same bytes)."""
    command = "fair-pipeline run --start 2026-01-01 --days 7"
    home = tmp_path / "home"
    _check(command, _shell(command, home))
    check_week_figures(home)


def check_week_figures(home: Path) -> None:
    import duckdb

    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        where = " WHERE partition_date = DATE '2026-01-07'"
        evaluation = con.execute("SELECT method, \"group\", exposure_over_merit FROM marts.eo_evaluation" + where).df()
        rankers = con.execute("SELECT lam, mi_proxy_train, truth_auc FROM marts.ranker_candidates" + where + " ORDER BY lam").df()
        ranking = con.execute("SELECT rank, model, family, cost, ci_low, ci_high, champion_version FROM marts.model_ranking"
                              + where + " ORDER BY rank").df()
        elicited = con.execute("SELECT n_queries, error_a, error_lam FROM marts.elicited_metrics").fetchone()
    eo, training, selection = ((REPO / "docs" / name).read_text() for name in ("eo.md", "training.md", "selection.md"))
    for method in ("raw", "unweighted", "weighted"):
        assert f"{method} {_ratio(evaluation, method):.3f}" in eo, (method, _ratio(evaluation, method))
    first, last = rankers.iloc[0], rankers.iloc[-1]
    assert f"truth AUC {first.truth_auc:.3f}" in training and f"→ {last.truth_auc:.3f} at λ = 30" in training
    assert f"Î {first.mi_proxy_train:.3f} → {last.mi_proxy_train:.3f}" in training
    assert f"recovered after {elicited[0]} queries" in selection and f"|â − a| = {elicited[1]:.4f}" in selection
    assert f"{len(ranking)} candidates of five families" in selection and ranking["family"].nunique() == 5
    winner = ranking.iloc[0]
    assert winner.family == "reject_option" and f"{winner.cost:.4f} [{winner.ci_low:.4f}, {winner.ci_high:.4f}]" in selection
    champion = ranking[ranking["champion_version"].notna()].iloc[0]
    assert f"| {int(champion['rank'])} (`fair-ranker@champion`) |" in selection
    assert f"{champion.cost:.4f} [{champion.ci_low:.4f}, {champion.ci_high:.4f}]" in selection
    # docs/selection.md's ranking table and runner-up figures are what its command prints from this run
    out = subprocess.run([sys.executable, "benchmarks/selection_week_table.py", "--home", str(home)], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    for line in filter(None, out.splitlines()):
        assert line in selection, line
