"""Which pairs of groups an audit compares: all pairs (a few groups), or each group against one reference.

Every group gets its own truncated AUCs and balanced xAUCs whatever is chosen; the choice decides the
comparison tables (group differences, xAUC of both directions and its delta, balanced-xAUC differences), so
their size, the sweep's columns and the output grow with the comparisons asked for: groups^2 / 2 pairs for
"all", groups - 1 for "reference" (thousands of groups stay linear in groups); "auto" is "all" up to
ALL_PAIRS_UP_TO groups, else "reference" (and "reference" whenever a reference group is named).
"""
from __future__ import annotations

import numpy as np

from fair_pipeline.audit.stats.validation import AuditInputError

MODES = ("all", "reference", "auto")
ALL_PAIRS_UP_TO = 10  # comparisons="auto": all pairs of up to this many groups (45 pairs), else each vs a reference


def compared_pairs(groups, rows, comparisons: str = "all", reference=None) -> tuple[list, object]:
    """(a, b) group positions of every comparison (a's figure minus b's), and the reference group (or None).

    ``rows``: rows per group (the default reference is the largest group, the first of equals); ``reference``:
    a group value for ``comparisons="reference"``. "all" lists the pairs a < b in combinations order.
    """
    groups = list(groups)
    if comparisons not in MODES:
        raise AuditInputError(f"comparisons must be one of {list(MODES)}, got {comparisons!r}")
    if comparisons == "auto":
        comparisons = "all" if len(groups) <= ALL_PAIRS_UP_TO and reference is None else "reference"
    if comparisons == "all":
        if reference is not None:
            raise AuditInputError("a reference group is for comparisons='reference' (each group against it)")
        ia, ib = np.triu_indices(len(groups), 1)
        return list(zip(ia.tolist(), ib.tolist())), None
    if reference is None:
        r = int(np.argmax(np.asarray(rows, dtype=np.float64)))
    else:
        matches = [i for i, g in enumerate(groups) if str(g) == str(reference)]
        if not matches:
            shown = groups[:10] + (["..."] if len(groups) > 10 else [])
            raise AuditInputError(f"reference group {reference!r} is not among the groups {shown}")
        r = matches[0]
    return [(a, r) for a in range(len(groups)) if a != r], groups[r]
