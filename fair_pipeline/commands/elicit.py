"""`fair-pipeline elicit`: elicit a fairness metric by answering pairwise comparisons in the terminal, stored
in DuckDB as they are given (`fair_pipeline.selection.session`), so a session resumes or replays. `--help` imports
no solver (scipy, pandas)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from fair_pipeline.platform import settings
from fair_pipeline.selection.elicitation.defaults import DEFAULT_RADIUS, MAX_INTERACTIVE_GROUPS

if TYPE_CHECKING:
    from fair_pipeline.selection.session import SessionConfig

EXIT_OK, EXIT_PAUSED, EXIT_ERROR = 0, 3, 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", type=Path, default=None,
                        help="DuckDB file for sessions and answers (default: $FAIR_PIPELINE_HOME/elicitation.duckdb)")
    parser.add_argument("--session", default=None, help="session id; an existing id resumes that session")
    parser.add_argument("--groups", type=int, default=2,
                        help=f"number of groups m (new sessions; at most {MAX_INTERACTIVE_GROUPS})")
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
    parser.add_argument("--replay", action="store_true",
                        help="recompute the metric from the stored answers without asking anything")
    parser.add_argument("--list", action="store_true", help="list stored sessions and exit")


def _config_from_args(args: argparse.Namespace) -> SessionConfig:
    import numpy as np

    from fair_pipeline.selection.elicitation.validation import check_dimensions, check_search
    from fair_pipeline.selection.session import SessionConfig

    check_dimensions(args.groups, args.classes)
    if args.groups > MAX_INTERACTIVE_GROUPS:
        raise ValueError(
            f"--groups {args.groups}: a question would show {2 * args.groups * args.classes} rates side by side and "
            f"the metric would weigh {args.groups * (args.groups - 1) // 2} group pairs; a person cannot judge that "
            f"in 40 answers. Use at most {MAX_INTERACTIVE_GROUPS} groups (merge small groups, or elicit on the "
            f"largest ones)")
    check_search(args.classes, args.radius, args.tolerance, args.inner_radius)  # before the session is stored
    labels = (tuple(args.group_labels.split(",")) if args.group_labels
              else tuple(f"group {g + 1}" for g in range(args.groups)))
    if len(labels) != args.groups:
        raise ValueError(f"--group-labels names {len(labels)} groups but --groups is {args.groups}")
    weights = None
    if args.group_weights:
        weights = tuple(np.asarray(json.loads(args.group_weights), dtype=float).ravel().tolist())
    config = SessionConfig(args.groups, args.classes, labels, weights, args.tolerance, args.radius, args.inner_radius,
                           args.method)
    config.tau()  # validate now, with a clear message
    return config


def run(args: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """The exit code: EXIT_OK, EXIT_PAUSED (resumable) or EXIT_ERROR."""
    import uuid

    from fair_pipeline.selection.elicitation import InconsistentOracleError, metric_to_dict
    from fair_pipeline.selection.elicitation.oracles import MissingPreferenceError
    from fair_pipeline.selection.session import SessionPaused, SessionStore, describe_metric, run_session

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
            config = _config_from_args(args)
            store.create(session_id, config)
            print(f"New elicitation session {session_id}.", file=stdout)
        else:
            print(f"Resuming session {session_id} ({len(store.answers(session_id))} answers stored).", file=stdout)
        try:
            metric = run_session(store, session_id, config, stdin, stdout, interactive=not args.replay)
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
        return EXIT_OK
    finally:
        store.close()
