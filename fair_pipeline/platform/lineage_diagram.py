"""The README's picture of the pipeline, generated from the Definitions: one node per asset group, one edge per
group that reads another. tests/e2e/test_readme.py compares the README's block with `mermaid(defs)` and prints the
new block when the asset graph changed, so the picture cannot drift from the graph.
"""
from __future__ import annotations

from collections.abc import Iterable

import dagster as dg

# What each group does, in a few words (the node's second line). A group missing here is an error, so a new
# stage cannot appear in the picture without saying what it is.
GROUP_SUMMARIES = {
    "ingestion": "landing files → raw<br/>validated, quarantine",
    "staging": "SQL models<br/>staging views of raw",
    "marts": "SQL models<br/>daily volume, CTR, EO click counts",
    "position_bias": "position bias<br/>w_j with CIs",
    "eo_transform": "EO transforms<br/>per-group weighted CDFs",
    "training": "ranker candidates<br/>MI-penalized λ path",
    "audit": "fairness audit<br/>partial AUC, xAUC, pairwise",
    "selection": "model selection<br/>elicited metric, registry alias",
    "reporting": "fairness report<br/>+ trend",
    "benchmarks": "benchmark models<br/>Adult, COMPAS (own job)",
}


def group_edges(definitions: dg.Definitions) -> tuple[list[str], list[tuple[str, str]]]:
    """The groups in pipeline order (a topological order of the group graph, ties in GROUP_SUMMARIES' order) and
    the edges between groups: (upstream, downstream) for every asset that reads an asset of another group."""
    graph = definitions.resolve_asset_graph()
    group_of = {key: graph.get(key).group_name for key in graph.get_all_asset_keys()}
    edges = sorted({(group_of[parent], group_of[key]) for key in group_of for parent in graph.get(key).parent_keys
                    if parent in group_of and group_of[parent] != group_of[key]})
    return _topological(set(group_of.values()), edges), edges


def _topological(groups: Iterable[str], edges: list[tuple[str, str]]) -> list[str]:
    rank = {group: k for k, group in enumerate(GROUP_SUMMARIES)}
    remaining, ordered = set(groups), []
    while remaining:
        ready = sorted((g for g in remaining if not any(up in remaining and down == g for up, down in edges)),
                       key=lambda g: (rank.get(g, len(rank)), g))
        if not ready:
            raise ValueError(f"the asset groups {sorted(remaining)} read each other in a cycle")
        ordered.append(ready[0])
        remaining.remove(ready[0])
    return ordered


def mermaid(definitions: dg.Definitions) -> str:
    """The Mermaid flowchart of the asset groups (the README's ```mermaid block, fences included)."""
    groups, edges = group_edges(definitions)
    unknown = [g for g in groups if g not in GROUP_SUMMARIES]
    if unknown:
        raise ValueError(f"asset groups without a summary in lineage_diagram.GROUP_SUMMARIES: {unknown}")
    lines = ["```mermaid", "flowchart LR"]
    lines += [f'  {group}["{GROUP_SUMMARIES[group]}"]' for group in groups]
    lines += [f"  {up} --> {down}" for up, down in sorted(edges, key=lambda e: (groups.index(e[0]), groups.index(e[1])))]
    return "\n".join([*lines, "```"])

