"""`fair-pipeline audit FILE`: fairness audit of any scored, labelled Parquet/CSV file (partial AUCs, xAUC,
pairwise accuracies). The engine is `fair_pipeline.audit.files`, its text tables `fair_pipeline.audit.formatting`."""
from __future__ import annotations

import argparse
import json
import sys

from fair_pipeline.audit.files import ALL_PAIRS_UP_TO, DEFAULT_MAX_GROUPS, MEMORY_LIMIT
from fair_pipeline.audit.stats.compare import DEFAULT_MIN_CLUSTERS, DEFAULT_MIN_COUNT
from fair_pipeline.audit.stats.equivalence import DEFAULT_MARGINS
from fair_pipeline.audit.stats.truncated_auc import DEFAULT_CUTOFFS


def _cutoff_list(text: str) -> list:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--cutoffs must be comma-separated numbers, got {text!r}") from exc


def _margin(text: str) -> tuple[str, float]:
    metric, sep, value = text.partition("=")
    try:
        if not sep:
            raise ValueError
        return metric.strip(), float(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--margin must be METRIC=VALUE (e.g. xauc=0.03), got {text!r}") from exc


def _bounded(kind, low, high=None, what: str = ""):
    """argparse type: a number of ``kind`` in [low, high] (exclusive bounds for floats), else a one-line error."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        ok = value is not None and (value >= low if kind is int else low < value) and (
            high is None or (value < high if kind is float else value <= high))
        if not ok:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value
    return parse


def _memory_limit(text: str) -> str:
    if not MEMORY_LIMIT.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"expected a size such as 2GB or 512MiB, got {text!r}")
    return text.strip()


def _one_line_errors(parser: argparse.ArgumentParser) -> None:
    """Bad options end in one line on stderr (exit 2), without argparse's usage block."""
    def error(message: str):
        parser.exit(2, f"{parser.prog}: error: {message}\n")
    parser.error = error


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """FILE --score COL --label COL [--group COL] [...]."""
    _one_line_errors(parser)
    parser.add_argument("file", help="Parquet or CSV file (a glob of Parquet files also works)")
    parser.add_argument("--score", required=True, help="score column (higher = more positive)")
    parser.add_argument("--label", required=True, help="0/1 label column (1 = positive outcome)")
    parser.add_argument("--group", help="protected-group column")
    parser.add_argument("--query", help="query column: adds within-query pairwise accuracies, two-way clustered by item and query "
                        "(new items and new queries) when a --cluster column other than the query holds item ids, "
                        "else query-clustered")
    parser.add_argument("--cluster", action="append", metavar="COL", default=None,
                        help="column whose values are clusters of dependent rows (e.g. the item id when items repeat): "
                        "cluster-robust SEs; repeat once for two-way clustering (e.g. --cluster item_id --cluster query_id)")
    parser.add_argument("--min-clusters", type=_bounded(int, 2, what="an integer >= 2"), default=DEFAULT_MIN_CLUSTERS,
                        help=f"with --cluster: clusters (e.g. items) a group's positives and its negatives must each come "
                        f"from before its clustered CI is given; fewer is reported 'not estimable' (default "
                        f"{DEFAULT_MIN_CLUSTERS}: fewer covered 87-91%% in Monte Carlo, docs/audit_inference.md)")
    parser.add_argument("--cutoffs", type=_cutoff_list, default=list(DEFAULT_CUTOFFS),
                        help="FPR cutoffs in (0, 1], comma-separated (default 0.05,0.1,0.2,0.5,1)")
    parser.add_argument("--min-count", type=_bounded(int, 2, what="an integer >= 2"), default=DEFAULT_MIN_COUNT,
                        help="positives and negatives a group needs to be estimated (>= 2)")
    parser.add_argument("--confidence", type=_bounded(float, 0.5, 1.0, what="a number in (0.5, 1)"), default=0.95,
                        help="confidence level of every interval (0.95: 95%% intervals)")
    parser.add_argument("--max-groups", type=_bounded(int, 1, what="an integer >= 1"), default=DEFAULT_MAX_GROUPS,
                        help=f"refuse files with more groups than this (default {DEFAULT_MAX_GROUPS}: a guard against "
                        "an id column given as --group)")
    parser.add_argument("--compare", choices=("auto", "all", "reference"), default="auto",
                        help=f"which pairs of groups to compare: all pairs, each group with --reference, or auto (all "
                        f"pairs of up to {ALL_PAIRS_UP_TO} groups, else reference); the output grows with the pairs")
    parser.add_argument("--reference", metavar="GROUP", default=None,
                        help="the group every other is compared with (default the largest; implies --compare reference)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="read s3://, http(s):// paths (needs DuckDB's httpfs installed; never auto-installed)")
    parser.add_argument("--margin", type=_margin, action="append", default=[], metavar="METRIC=VALUE",
                        help="practical margin δ of a metric, repeatable (defaults: "
                        + ", ".join(f"{k}={v:g}" for k, v in DEFAULT_MARGINS.items())
                        + "); each gap is larger than δ, significant but within ±δ, equivalent (TOST), "
                        "inconclusive or not estimable")
    parser.add_argument("--memory-limit", type=_memory_limit, default="2GB", help="DuckDB memory limit (spills beyond)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--curves", action="store_true", help="include ROC/xROC curves in the JSON")


def run(args: argparse.Namespace) -> int:
    import duckdb

    from fair_pipeline.audit.files import audit_file
    from fair_pipeline.audit.formatting import format_audit
    from fair_pipeline.audit.stats import AuditInputError
    from fair_pipeline.audit.stats.equivalence import resolve_margins

    try:
        result = audit_file(args.file, args.score, args.label, args.group, args.query, args.cutoffs,
                            clusters=args.cluster, min_count=args.min_count, min_clusters=args.min_clusters,
                            confidence=args.confidence,
                            margins=resolve_margins(dict(args.margin)), memory_limit=args.memory_limit,
                            max_groups=args.max_groups, allow_remote=args.allow_remote,
                            comparisons="reference" if args.reference is not None and args.compare == "auto"
                            else args.compare, reference=args.reference)
    except (AuditInputError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except duckdb.Error as exc:  # e.g. a malformed CSV row found mid-scan
        print(f"error: {args.file}: DuckDB could not read it: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_dict(curves=args.curves), indent=2))
    else:
        print(format_audit(result))
    return 0
