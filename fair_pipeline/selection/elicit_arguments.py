"""The arguments of `fair-pipeline elicit`, apart from the session code so that `elicit --help` imports no solver
(scipy, pandas): the run itself is `session.run_elicit`."""
from __future__ import annotations

import argparse
from pathlib import Path

from fair_pipeline.selection.elicitation.defaults import DEFAULT_RADIUS


def add_elicit_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Arguments of ``fair-pipeline elicit``."""
    parser.add_argument("--db", type=Path, default=None,
                        help="DuckDB file for sessions and answers (default: $FAIR_PIPELINE_HOME/elicitation.duckdb)")
    parser.add_argument("--session", default=None, help="session id; an existing id resumes that session")
    parser.add_argument("--groups", type=int, default=2, help="number of groups m (new sessions)")
    parser.add_argument("--group-labels", default=None, help="comma-separated group names, in group order")
    parser.add_argument("--classes", type=int, default=2, help="number of classes k (2: TPR, TNR)")
    parser.add_argument("--group-weights", default=None,
                        help="JSON list of lists tau[g][i] = P(G=g | Y=i); default uniform")
    parser.add_argument("--tolerance", type=float, default=1e-2, help="angular bisection tolerance")
    parser.add_argument("--radius", type=float, default=DEFAULT_RADIUS,
                        help="radius of the feasible sphere of rates around the uniform-random classifier")
    parser.add_argument("--inner-radius", type=float, default=None,
                        help="radius of the small spheres compared in each search (default radius/10); "
                             "larger makes the two profiles of a question easier to tell apart")
    parser.add_argument("--replay", action="store_true",
                        help="recompute the metric from the stored answers without asking anything")
    parser.add_argument("--list", action="store_true", help="list stored sessions and exit")
    return parser
