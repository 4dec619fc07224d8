"""`fair-pipeline elicit`: elicit a fairness metric by answering pairwise comparisons in the terminal, stored
in DuckDB as they are given (`fair_pipeline.selection.session`), so a session resumes or replays. `--help` imports
no solver (scipy, pandas)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from fair_pipeline.commands.arguments import date
from fair_pipeline.platform import settings
from fair_pipeline.selection.elicitation.defaults import DEFAULT_RADIUS, MAX_INTERACTIVE_GROUPS

if TYPE_CHECKING:
    from fair_pipeline.selection.session import SessionConfig

EXIT_OK, EXIT_PAUSED, EXIT_ERROR = 0, 3, 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", type=Path, default=None,
                        help="DuckDB file for sessions and answers (default: $FAIR_PIPELINE_HOME/elicitation.duckdb)")
    parser.add_argument("--session", default=None, help="session id; an existing id resumes that session")
    parser.add_argument("--groups", type=int, default=None,
                        help=f"number of groups m (new sessions; at most {MAX_INTERACTIVE_GROUPS}; default 2, or the "
                             "groups of --partition)")
    parser.add_argument("--method", choices=("adaptive", "qpme"), default="adaptive",
                        help="adaptive: at most 40 questions with visible differences and an 'about the same' "
                             "answer (default); qpme: the paper's bisections (hundreds of answers)")
    parser.add_argument("--group-labels", default=None, help="comma-separated group names, in group order")
    parser.add_argument("--classes", type=int, default=2, help="number of classes k (2: TPR, TNR)")
    parser.add_argument("--group-weights", default=None,
                        help="JSON list of lists tau[g][i] = P(G=g | Y=i); default uniform")
    parser.add_argument("--tolerance", type=float, default=1e-2, help="angular bisection tolerance (qpme)")
    parser.add_argument("--radius", type=float, default=DEFAULT_RADIUS,
                        help="radius of the feasible sphere of rates around the uniform-random classifier")
    parser.add_argument("--inner-radius", type=float, default=None,
                        help="qpme: radius of the small spheres compared in each search (default radius/10); "
                             "larger makes the two profiles of a question easier to tell apart")
    parser.add_argument("--partition", type=partition_or_latest, default=None,
                        help="YYYY-MM-DD or 'latest': pick among that model_selection partition's candidates (their "
                             "per-group TPR/TNR from marts.model_ranking in the home's warehouse), stopping as soon as "
                             "the answers settle their order (new adaptive sessions)")
    parser.add_argument("--exposure-points", type=exposure_points, default=None,
                        help="answer the exposure question here instead of at the prompt: the percentage points of "
                             "accuracy a four-fifths exposure gap is worth (0-100; 0: exposure is reported, not "
                             "weighed); a session keeps its first answer")
    parser.add_argument("--replay", action="store_true",
                        help="recompute the metric from the stored answers without asking anything")
    parser.add_argument("--list", action="store_true", help="list stored sessions and exit")


def exposure_points(text: str) -> float:
    """argparse type: points in [0, 100] (`exposure_question.parse_points`)."""
    from fair_pipeline.selection.elicitation.exposure_question import parse_points

    try:
        return parse_points(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def partition_or_latest(text: str) -> str:
    """argparse type: 'latest' or a YYYY-MM-DD date (kept as text; 'latest' is resolved against the warehouse)."""
    return text if text == "latest" else date(text).isoformat()


def _config_from_args(args: argparse.Namespace) -> tuple[SessionConfig, tuple[str, ...]]:
    """The new session's settings and the partition's candidates left out (without rates in every group)."""
    import numpy as np

    from fair_pipeline.selection.elicitation.validation import check_dimensions, check_search
    from fair_pipeline.selection.session import SessionConfig

    labels = tuple(args.group_labels.split(",")) if args.group_labels else None
    profiles = None
    if args.partition is not None:
        profiles = _candidates(args, labels)
        labels = profiles.group_labels
    n_groups = args.groups if args.groups is not None else len(labels) if profiles is not None else 2
    check_dimensions(n_groups, args.classes)
    if n_groups > MAX_INTERACTIVE_GROUPS:
        raise ValueError(
            f"--groups {n_groups}: a question would show {2 * n_groups * args.classes} rates side by side and "
            f"the metric would weigh {n_groups * (n_groups - 1) // 2} group pairs; a person cannot judge that "
            f"in 40 answers. Use at most {MAX_INTERACTIVE_GROUPS} groups (merge small groups, or elicit on the "
            f"largest ones)")
    check_search(args.classes, args.radius, args.tolerance, args.inner_radius)  # before the session is stored
    labels = labels or tuple(f"group {g + 1}" for g in range(n_groups))
    if len(labels) != n_groups:
        where = f"partition {profiles.partition} has" if profiles else "--group-labels names"
        hint = "; leave --groups out to use them" if profiles else ""
        raise ValueError(f"{where} {len(labels)} groups but --groups is {n_groups}{hint}")
    weights = None
    if args.group_weights:
        weights = tuple(np.asarray(json.loads(args.group_weights), dtype=float).ravel().tolist())
    candidates = {}
    if profiles is not None:
        candidates = {"candidates": tuple(profiles.profiles.ravel().tolist()), "candidate_names": profiles.names,
                      "candidates_partition": profiles.partition}
    config = SessionConfig(n_groups, args.classes, labels, weights, args.tolerance, args.radius, args.inner_radius,
                           args.method, **candidates)
    config.tau()  # validate now, with a clear message
    return config, profiles.left_out if profiles is not None else ()


def _candidates(args: argparse.Namespace, labels: tuple[str, ...] | None):
    """The partition's candidate profiles; ValueError (one line) when they cannot steer this elicitation."""
    import duckdb

    from fair_pipeline.selection.candidate_profiles import load_candidate_profiles

    if args.method != "adaptive":
        raise ValueError("--partition needs --method adaptive (the paper's bisections ask fixed questions)")
    if args.classes != 2:
        raise ValueError(f"--partition: the candidates' rates are TPR and TNR (2 classes), not --classes {args.classes}")
    try:
        return load_candidate_profiles(settings.warehouse_path(), None if args.partition == "latest" else args.partition,
                                       labels)
    except duckdb.Error as error:  # e.g. a run holds the warehouse's write lock
        raise ValueError(f"cannot read the warehouse {settings.warehouse_path()}: {error}".splitlines()[0]) from error


def _candidates_line(config: SessionConfig, left_out: tuple[str, ...]) -> str:
    n = len(config.candidate_names)
    skipped = (" Left out, without rates in every group (not estimable): " + ", ".join(left_out) + "."
               if left_out else "")
    return (f"Picking among the {n} candidates of partition {config.candidates_partition} "
            f"({settings.warehouse_path()}, marts.model_ranking), groups {list(config.group_labels)}: questions stop "
            "as soon as the answers settle their order." + skipped)


def run(args: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """The exit code: EXIT_OK, EXIT_PAUSED (resumable) or EXIT_ERROR."""
    import uuid

    from fair_pipeline.selection.elicitation import InconsistentOracleError, metric_to_dict
    from fair_pipeline.selection.elicitation.oracles import MissingPreferenceError
    from fair_pipeline.selection.session import (
        SessionPaused,
        SessionStore,
        describe_candidates,
        describe_metric,
        run_session,
    )

    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    db = args.db or settings.default_elicitation_db()
    if Path(db).is_dir():
        print(f"--db {db} is a folder; give a DuckDB file (e.g. {Path(db) / 'elicitation.duckdb'})", file=stdout)
        return EXIT_ERROR
    import duckdb

    try:
        store = SessionStore(db)
    except (duckdb.Error, OSError) as error:  # not a DuckDB file, or a folder we can't write
        print(f"cannot open the elicitation store {db}: {error}", file=stdout)
        return EXIT_ERROR
    try:
        if args.list:
            sessions = store.list_sessions()
            if not sessions:
                print(f"no elicitation sessions in {db}; start one with `fair-pipeline elicit`", file=stdout)
            for sid, status, created, n in sessions:
                print(f"{sid}\t{status}\t{created:%Y-%m-%d %H:%M}\t{n} answers", file=stdout)
            return EXIT_OK
        session_id = args.session or uuid.uuid4().hex[:8]
        config = store.load_config(session_id)
        if config is None:
            if args.replay:
                print(f"no session {session_id!r} in {db}", file=stdout)
                return EXIT_ERROR
            config, left_out = _config_from_args(args)  # ValueError (CandidateProfilesError too): one line from main
            store.create(session_id, config)
            print(f"New elicitation session {session_id}.", file=stdout)
            if config.candidates is not None:
                print(_candidates_line(config, left_out), file=stdout)
        else:
            print(f"Resuming session {session_id} ({len(store.answers(session_id))} answers stored).", file=stdout)
            if args.partition is not None:  # a session keeps the candidates it started with: answers depend on them
                kept = f"those of partition {config.candidates_partition}" if config.candidates else "none"
                print(f"--partition applies to new sessions; this session's candidates are {kept}.", file=stdout)
        try:
            metric = run_session(store, session_id, config, stdin, stdout, interactive=not args.replay)
            metric = _with_exposure_weight(store, session_id, metric, config, args, stdin, stdout)
        except SessionPaused:
            n = len(store.answers(session_id))
            print(f"\nSession {session_id} paused after {n} answers; resume with: "
                  f"fair-pipeline elicit --db {db} --session {session_id}",
                  file=stdout)
            return EXIT_PAUSED
        except MissingPreferenceError:
            print(f"Session {session_id} is incomplete ({len(store.answers(session_id))} answers); "
                  "run without --replay to continue it.", file=stdout)
            return EXIT_PAUSED
        except InconsistentOracleError as exc:
            store.finish(session_id, "inconsistent", None)
            print(f"Session {session_id}: the answers cannot come from one metric: {exc}", file=stdout)
            return EXIT_ERROR
        result = metric_to_dict(metric) | {"n_inconsistencies": len(metric.diagnostics["cycles"]),
                                          "group_labels": list(config.group_labels)}
        store.finish(session_id, "completed", result)
        print(describe_metric(metric, config.group_labels), file=stdout)
        if config.candidates is not None:
            print(describe_candidates(metric, config), file=stdout)
        return EXIT_OK
    finally:
        store.close()


def _with_exposure_weight(store, session_id: str, metric, config, args, stdin, stdout):
    """The metric carrying the session's exposure weight: its stored answer, else ``--exposure-points``, else asked
    (not on --replay: a session replayed without an answer weighs exposure 0 and says so)."""
    from fair_pipeline.selection.elicitation.exposure_question import with_exposure_answer
    from fair_pipeline.selection.session import ask_exposure_points

    points = store.exposure_answer(session_id)
    if points is None and (args.exposure_points is not None or not args.replay):
        points = args.exposure_points
        if points is None:
            points = ask_exposure_points(metric, config.group_labels, stdin, stdout)
        store.record_exposure_answer(session_id, points)
    elif points is not None and args.exposure_points is not None and args.exposure_points != points:
        print(f"--exposure-points {args.exposure_points:g} ignored: session {session_id} answered {points:g}.",
              file=stdout)
    return with_exposure_answer(metric, points)
