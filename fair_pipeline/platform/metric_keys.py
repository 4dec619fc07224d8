"""Stable MLflow names for figures that belong to a group (or a pair of groups).

A group label is data: `Women's`, `age 65+`, an emoji, right-to-left text, HTML or a 10 KB string. MLflow metric
and parameter names allow only alphanumerics and `_-. :/` and at most 250 characters, so a label never goes into a
name as it is. `group_key` gives each label a short key that is the same in every run (a readable ASCII slug plus
a hash of the exact label, so two labels that slug alike still differ), and `label_table` is logged beside the
metrics so each key can be read back as its label.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

import pandas as pd

MAX_NAME_LENGTH = 250  # MLflow's limit for metric and parameter names
_SLUG_LENGTH = 24
_ALLOWED_NAME = re.compile(r"[A-Za-z0-9_\-. :/]+")
LABEL_TABLE = "group_labels"  # the MLflow table (artifact `group_labels.json`) mapping key -> label
MISSING_LABEL_KEY = "missing"  # a NULL group label


def group_key(label: object) -> str:
    """`<slug>-<8 hex digits>`: the label's ASCII letters and digits (lower case, runs of anything else as one
    `_`, at most 24 characters) and the start of the SHA-256 of its UTF-8 text. NULL/NaN is `missing`."""
    if label is None or (isinstance(label, float) and label != label):
        return MISSING_LABEL_KEY
    text = str(label)
    slug = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:_SLUG_LENGTH].strip("_") or "g"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{slug}-{digest}"


def metric_name(*parts: object) -> str:
    """Parts joined by `/`; every part must already be a key or a fixed word, never a label: a part MLflow would
    refuse raises ValueError naming it, before anything is logged."""
    name = "/".join(str(p) for p in parts)
    bad = [str(p) for p in parts if not _ALLOWED_NAME.fullmatch(str(p))]
    if bad or len(name) > MAX_NAME_LENGTH:
        shown = (bad[0][:60] + "...") if bad and len(bad[0]) > 60 else (bad[0] if bad else name[:60] + "...")
        raise ValueError(f"not a valid MLflow name part: {shown!r} (use group_key for labels; names allow "
                         f"alphanumerics and `_-. :/`, at most {MAX_NAME_LENGTH} characters)")
    return name


def label_table(labels: Iterable[object]) -> pd.DataFrame:
    """One row per distinct label: `key` (as used in metric names) and `label` (the exact text, NULL for missing)."""
    seen: dict[str, object] = {}
    for label in labels:
        seen.setdefault(group_key(label), None if group_key(label) == MISSING_LABEL_KEY else str(label))
    return pd.DataFrame({"key": pd.Series(list(seen), dtype=object), "label": pd.Series(list(seen.values()), dtype=object)})
