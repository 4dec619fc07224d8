"""Turns every `dbt_like_sql/<layer>/<name>.sql` into a DuckDB table `<layer>.<name>` and a Dagster asset.

A model file is one SELECT. Dependencies are declared in the SQL itself:
    {{ ref('other_model') }}          another model, by file stem (names are unique across layers)
    {{ source('raw', 'table') }}      a table written by a Python asset (asset key raw/table)
A model is daily-partitioned when any input is (it must then output `partition_date` and filter its
partitioned inputs with `partition_date = $partition_date`); re-running a partition replaces exactly it.
A first-line comment `-- config: key=value, ...` may set `group` (Dagster group, default the layer),
`partitioned=false` (a full rebuild over all partitions, e.g. a window aggregate) and `materialized=view`
(a view over its inputs: no copy, no parameters; it keeps its inputs' partitions for lineage and exposes
their `partition_date` so downstream filters push down).
Other `$name` parameters are bound from `SQL_PARAMETERS`; values are never formatted into SQL text.
Beside each model, `<name>.yml` describes its table and columns and declares its tests (`sql_schemas`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import re
from functools import cache
from pathlib import Path

from fair_pipeline.platform import settings

# Raw tables written by Python assets, and whether they are daily-partitioned.
SOURCE_TABLES = {
    ("raw", "observational_impressions"): True,
    ("raw", "randomized_impressions"): True,
    ("raw", "items"): False,
    ("raw", "quarantine"): True,
}

# Tables written as a side product of other assets: a source() on them depends on those assets.
SOURCE_PRODUCERS = {
    ("raw", "quarantine"): (("raw", "observational_impressions"), ("raw", "randomized_impressions")),
}

# Named parameters SQL models may use besides $partition_date.
SQL_PARAMETERS: dict[str, object] = {
    # Fixed width of the score bins of marts.position_score_bins; equals position_bias.aggregates.FINE_BIN_WIDTH
    # (the in-memory aggregation), asserted by tests/position_bias/test_sql.py. A literal here keeps the
    # platform free of stage imports.
    "position_bias_bin_width": 0.01,
    # Score bin width of marts.eo_score_click_counts (EO transform knots sit 1e-3 apart in probability).
    "eo_score_bin_width": 1e-3,
}

_REF = re.compile(r"\{\{\s*ref\(\s*'([A-Za-z_][A-Za-z0-9_]*)'\s*\)\s*\}\}")
_SOURCE = re.compile(r"\{\{\s*source\(\s*'([A-Za-z_][A-Za-z0-9_]*)'\s*,\s*'([A-Za-z_][A-Za-z0-9_]*)'\s*\)\s*\}\}")
_CONFIG = re.compile(r"^\s*--\s*config:\s*(.*)$")
_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_TEMPLATE_LEFTOVER = re.compile(r"\{\{|\}\}|\{%")


class SqlModelError(ValueError):
    """A model file that cannot be turned into an asset; the message names the file."""


@dataclasses.dataclass(frozen=True)
class SqlModel:
    layer: str
    name: str
    path: Path
    text: str
    refs: tuple[str, ...]
    sources: tuple[tuple[str, str], ...]
    config: dict[str, str]

    @property
    def table(self) -> str:
        return f"{self.layer}.{self.name}"

    @property
    def key(self) -> tuple[str, str]:
        return (self.layer, self.name)

    @property
    def group(self) -> str:
        return self.config.get("group", self.layer)

    @property
    def is_view(self) -> bool:
        return self.config.get("materialized") == "view"

    @property
    def code_version(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:12]

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(sorted(set(_PARAM.findall(_strip_comments(self.text)))))


def _strip_comments(text: str) -> str:
    return "\n".join(line.split("--", 1)[0] for line in text.splitlines())


def _parse_config(path: Path, text: str) -> dict[str, str]:
    first = text.splitlines()[0] if text.strip() else ""
    match = _CONFIG.match(first)
    if not match:
        return {}
    config = {}
    for item in filter(None, (part.strip() for part in match.group(1).split(","))):
        if "=" not in item:
            raise SqlModelError(f"{path}: config entry {item!r} is not key=value")
        key, value = (s.strip() for s in item.split("=", 1))
        if key not in ("group", "partitioned", "materialized"):
            raise SqlModelError(f"{path}: unknown config key {key!r} (allowed: group, partitioned, materialized)")
        if key == "materialized" and value not in ("table", "view"):
            raise SqlModelError(f"{path}: materialized={value!r} must be table or view")
        config[key] = value
    return config


def parse_model(path: Path, root: Path) -> SqlModel:
    relative = path.relative_to(root)
    if len(relative.parts) != 2:
        raise SqlModelError(f"{path}: models live at dbt_like_sql/<layer>/<name>.sql")
    text = path.read_text()
    if not text.strip():
        raise SqlModelError(f"{path}: empty model")
    return SqlModel(
        layer=relative.parts[0],
        name=path.stem,
        path=path,
        text=text,
        refs=tuple(dict.fromkeys(_REF.findall(text))),
        sources=tuple(dict.fromkeys(_SOURCE.findall(text))),
        config=_parse_config(path, text),
    )


def discover_models(root: Path | None = None) -> dict[str, SqlModel]:
    """All models by name, validated: unique names, known refs and sources, no cycles."""
    root = Path(root or settings.SQL_ROOT)
    models: dict[str, SqlModel] = {}
    for path in sorted(root.glob("*/*.sql")):
        model = parse_model(path, root)
        if model.name in models:
            raise SqlModelError(f"{path}: model name {model.name!r} already defined in {models[model.name].path}")
        models[model.name] = model
    for model in models.values():
        for ref in model.refs:
            if ref not in models:
                raise SqlModelError(f"{model.path}: ref('{ref}') names no model under {root}")
        for source in model.sources:
            if source not in SOURCE_TABLES:
                raise SqlModelError(f"{model.path}: source{source} is not one of {sorted(SOURCE_TABLES)}")
    topological_order(models)
    for model in models.values():
        if model.is_view:
            if model.parameters:
                raise SqlModelError(f"{model.path}: a view cannot take parameters {list(model.parameters)}")
            continue
        if is_partitioned(model, models) and "partition_date" not in model.parameters:
            raise SqlModelError(
                f"{model.path}: has partitioned inputs, so it must filter them with partition_date = $partition_date"
                " (or declare `-- config: partitioned=false`)"
            )
        unknown = set(model.parameters) - {"partition_date"} - set(SQL_PARAMETERS)
        if unknown:
            raise SqlModelError(f"{model.path}: parameters {sorted(unknown)} are not in sql_models.SQL_PARAMETERS")
    return models


def topological_order(models: dict[str, SqlModel]) -> list[str]:
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "active":
            raise SqlModelError(f"dependency cycle among SQL models: {' -> '.join(chain + (name,))}")
        state[name] = "active"
        for ref in models[name].refs:
            visit(ref, chain + (name,))
        state[name] = "done"
        order.append(name)

    for name in sorted(models):
        visit(name, ())
    return order


def is_partitioned(model: SqlModel, models: dict[str, SqlModel]) -> bool:
    declared = model.config.get("partitioned")
    if declared is not None:
        if declared not in ("false", "true", "daily"):
            raise SqlModelError(f"{model.path}: partitioned={declared!r} must be false, true or daily")
        return declared != "false"
    return any(SOURCE_TABLES[s] for s in model.sources) or any(is_partitioned(models[r], models) for r in model.refs)


def render_sql(text: str, models: dict[str, SqlModel] | None = None) -> tuple[str, list[tuple[str, str]]]:
    """Replace ref()/source() with table names; returns (sql, dependency asset keys)."""
    models = models if models is not None else _default_models()
    deps: list[tuple[str, str]] = []

    def ref(match: re.Match) -> str:
        model = models[match.group(1)]
        deps.append(model.key)
        return model.table

    def source(match: re.Match) -> str:
        table = (match.group(1), match.group(2))
        deps.extend(SOURCE_PRODUCERS.get(table, (table,)))
        return f"{table[0]}.{table[1]}"

    sql = _SOURCE.sub(source, _REF.sub(ref, text))
    if _TEMPLATE_LEFTOVER.search(_strip_comments(sql)):
        raise SqlModelError("unrendered template syntax left in SQL (only ref() and source() are supported)")
    return sql, list(dict.fromkeys(deps))


@cache
def _default_models() -> dict[str, SqlModel]:
    return discover_models()


def bind_parameters(model: SqlModel, partition_date: str | None = None) -> dict[str, object]:
    params = {name: SQL_PARAMETERS[name] for name in model.parameters if name != "partition_date"}
    if "partition_date" in model.parameters:
        if partition_date is None:
            raise SqlModelError(f"{model.path}: needs a partition_date")
        params["partition_date"] = partition_date
    return params
