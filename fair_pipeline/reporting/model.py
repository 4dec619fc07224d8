"""What a report is made of: sections of text, tables, figures and plain-language findings.

A section builder is `build(inputs: ReportInputs) -> SectionContent`. It reads its stage's output
through `inputs` (the warehouse only) and raises `StageMissing` (directly, or via `inputs.sql` /
`inputs.stored_table`) when that stage has no output for the report's partition, which the report shows as a
missing section, with the reason, instead of failing.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from fair_pipeline.platform import warehouse
from fair_pipeline.reporting import stored

# significant / not significant: a test without a practical margin; the next four: a group gap judged against
# its margin δ (`audit.stats.equivalence`: larger than δ, significant but within ±δ, equivalent by TOST,
# inconclusive); not estimable: too little data; info: a fact.
FindingStatus = Literal["significant", "not significant", "gap larger than δ", "within ±δ", "equivalent",
                        "inconclusive", "not estimable", "info"]
ALPHA = 0.05


class StageMissing(Exception):
    """The stage a section needs has never produced its output; `str(error)` says what is missing."""


@dataclasses.dataclass(frozen=True)
class Finding:
    """One plain-language statement, e.g. 'group 1 partial AUC is lower than group 0 (p = 0.003)'.

    Every finding is listed in its section; headline findings also make the report's summary (and the CLI's
    one screen), so a section with many detailed tests gives a few headlines that aggregate them."""

    text: str
    status: FindingStatus
    headline: bool = True
    verdict: str | None = None  # a group gap's verdict against its margin δ (audit.stats.equivalence.VERDICTS)


@dataclasses.dataclass(frozen=True)
class Text:
    markdown: str  # a paragraph; only **bold**, `code` and plain text are rendered to HTML


@dataclasses.dataclass(frozen=True)
class Table:
    frame: pd.DataFrame
    caption: str = ""


@dataclasses.dataclass(frozen=True)
class Figure:
    name: str  # file-name stem, unique within the report
    svg: bytes  # an SVG document (`fair_pipeline.charts.render`)
    caption: str = ""


Block = Text | Table | Figure


@dataclasses.dataclass
class SectionContent:
    """What a section builder returns. `metrics` are key figures copied into Dagster metadata and MLflow."""

    blocks: list[Block] = dataclasses.field(default_factory=list)
    findings: list[Finding] = dataclasses.field(default_factory=list)
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)
    source: str = ""  # where the data came from (warehouse tables and partition), shown under the title
    verdicts: list[str] = dataclasses.field(default_factory=list)  # one per group comparison, counted in the summary
    # one row per group comparison as its section shows it (GAP_COLUMNS), for the report's first screen
    gaps: pd.DataFrame | None = None


# model (the scored output), comparison (what is compared, e.g. 'I(0.1), group 1 − 0'), the effect and its 95% CI,
# the margin δ and the verdict.
GAP_COLUMNS = ["model", "comparison", "effect", "low", "high", "margin", "verdict"]


def gap_rows(model, comparison, effect, low, high, margin, verdict) -> pd.DataFrame:
    """The GAP_COLUMNS frame of a section's comparisons (columns given as Series of one length)."""
    return pd.DataFrame(dict(zip(GAP_COLUMNS, (model, comparison, effect, low, high, margin, verdict)))).reset_index(drop=True)


@dataclasses.dataclass(frozen=True)
class SectionSpec:
    key: str
    title: str
    stage: str
    build: Callable[[ReportInputs], SectionContent]


@dataclasses.dataclass
class Section:
    spec: SectionSpec
    content: SectionContent | None = None
    missing: str | None = None  # set when the stage has never run (or its output is unusable)

    @property
    def available(self) -> bool:
        return self.content is not None


@dataclasses.dataclass(frozen=True)
class Serving:
    """`name@champion` as the registry held it when the report was built (`version` None: the alias is not set)."""

    name: str
    version: str | None
    partition: str = "?"
    candidate: str = "?"
    read_at: str = ""


@dataclasses.dataclass
class ReportInputs:
    """Read access for section builders: the warehouse (read-only: marts and every stage's store tables),
    simulator truth."""

    home: Path
    warehouse_path: Path
    partition: Any = None  # the asset partition (a date) the report is for; None: each stage's newest output
    _con: Any = dataclasses.field(default=None, repr=False)
    _read: dict = dataclasses.field(default_factory=dict, repr=False)  # source name -> its tables, or StageMissing
    sources: dict[str, str] = dataclasses.field(default_factory=dict)
    marts: Any = None  # the warehouse engine of the logs' marts (a `Warehouse`); None: the DuckDB file
    serving: Serving | None = None  # the registry's alias at build time; None: not read (the selection's record only)

    def mart_sql(self, query: str, tables: Sequence[tuple[str, str]], params: dict | None = None) -> pd.DataFrame:
        """As `sql`, over the marts and staging views of the run's engine (Spark with `engine: spark`); the result
        stores stay in the DuckDB file (`sql`)."""
        if self.marts is None:
            return self.sql(query, tables, params)
        for table in tables:
            if not self.marts.table_exists(tuple(table)):
                raise StageMissing(f"table {'.'.join(table)} does not exist yet on {self.marts.name} "
                                   "(its asset has never been materialized)")
        return self.marts.query_df(query, params or {})

    def sql(self, query: str, tables: Sequence[tuple[str, str]], params: dict | None = None) -> pd.DataFrame:
        """Run a read-only query over the warehouse; StageMissing if any of `tables` (schema, name) is absent."""
        con = self._connection()
        for schema, name in tables:
            if not warehouse.table_exists(con, schema, name):
                raise StageMissing(f"table {schema}.{name} does not exist yet (its asset has never been materialized)")
        return con.execute(query, params or {}).df()

    def _connection(self):
        if not self.warehouse_path.exists():
            raise StageMissing(f"no warehouse at {self.warehouse_path}: ingestion has never run")
        if self._con is None:
            self._con = warehouse.connect(self.warehouse_path, read_only=True)
        return self._con

    def stored_table(self, name: str, required: Sequence[str]) -> pd.DataFrame:
        """Report table `name` (contracts: `fair_pipeline.reporting.sections`) made from its stage's store tables of
        the report's partition (`reporting.stored`); StageMissing saying what is missing or why the stage stored
        nothing, or which required columns the table lacks."""
        key = stored.TABLES[name]
        source = stored.SOURCES[key]
        if key not in self._read:
            try:
                self._read[key] = source.read(self._connection(), self.partition)
            except stored.MISSING as error:
                self._read[key] = StageMissing(f"stage {source.stage!r}: {error}")
        found = self._read[key]
        if isinstance(found, StageMissing):
            raise found
        frame = found.get(name, pd.DataFrame())
        where = "the newest partition" if self.partition is None else f"partition {self.partition}"
        if frame.empty:
            raise StageMissing(f"stage {source.stage!r} stored no rows for table {name!r} in {where}")
        absent = [column for column in required if column not in frame.columns]
        if absent:
            raise StageMissing(f"table {name!r} from {', '.join(source.tables)} lacks columns {absent} "
                               f"(has {list(frame.columns)})")
        self.sources[name] = f"warehouse {', '.join(source.tables)}, {where}"
        return frame

    def truth(self, name: str) -> pd.DataFrame | None:
        """Simulator ground truth (`<name>.parquet` of the partition's truth, `ingestion.landing.truth_dir`), for
        comparison only; None for real logs."""
        from fair_pipeline.ingestion.landing import truth_dir

        path = truth_dir(self.home / "landing", self.partition) / f"{name}.parquet"
        return pd.read_parquet(path) if path.exists() else None

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None
