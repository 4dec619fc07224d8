"""What a report is made of: sections of text, tables, figures and plain-language findings.

A section builder is `build(inputs: ReportInputs) -> SectionContent`. It reads its stage's output
through `inputs` and raises `StageMissing` (directly, or via `inputs.sql` / `inputs.stage_table`)
when that stage has never run, which the report shows as a missing section instead of failing.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from fair_pipeline.platform import warehouse

if TYPE_CHECKING:
    from fair_pipeline.platform.tracking import MLflowTracking

# significant / not significant: a test without a practical margin; the next four: a group gap judged against
# its margin δ (`audit.stats.equivalence`: larger than δ, significant but within ±δ, equivalent by TOST,
# inconclusive); not estimable: too little data; info: a fact.
FindingStatus = Literal["significant", "not significant", "gap larger than δ", "within ±δ", "equivalent",
                        "inconclusive", "not estimable", "info"]
ALPHA = 0.05


# Stages whose MLflow runs belong to no partition (their tables are read from the newest run of any).
UNPARTITIONED_STAGES = ("benchmarks",)


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
    source: str = ""  # where the data came from (table name, MLflow run), shown under the title
    verdicts: list[str] = dataclasses.field(default_factory=list)  # one per group comparison, counted in the summary


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


@dataclasses.dataclass
class ReportInputs:
    """Read access for section builders: the warehouse (read-only), MLflow stage tables, simulator truth."""

    home: Path
    warehouse_path: Path
    tracking: MLflowTracking | None = None
    partition: Any = None  # the asset partition (a date) the report is for; None: each stage's newest output
    _con: Any = dataclasses.field(default=None, repr=False)
    sources: dict[str, str] = dataclasses.field(default_factory=dict)
    marts: Any = None  # the warehouse engine of the logs' marts (a `Warehouse`); None: the DuckDB file

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
        if not self.warehouse_path.exists():
            raise StageMissing(f"no warehouse at {self.warehouse_path}: ingestion has never run")
        if self._con is None:
            self._con = warehouse.connect(self.warehouse_path, read_only=True)
        for schema, name in tables:
            if not warehouse.table_exists(self._con, schema, name):
                raise StageMissing(f"table {schema}.{name} does not exist yet (its asset has never been materialized)")
        return self._con.execute(query, params or {}).df()

    def stage_table(self, name: str, stage: str, required: Sequence[str]) -> pd.DataFrame:
        """The newest table `name` logged by a finished MLflow run (`TrackedRun.log_table`) of the report's
        partition (unpartitioned stages' runs carry none: then the newest run of any)."""
        if self.tracking is None:
            raise StageMissing(f"no MLflow tracking configured, so table {name!r} of stage {stage} cannot be read")
        found = None if self.partition is None else self.tracking.latest_table(name, partition=self.partition)
        if found is None:
            found = self.tracking.latest_table(name) if self.partition is None or stage in UNPARTITIONED_STAGES else None
        if found is None:
            where = "" if self.partition is None else f" for partition {self.partition}"
            partition = None if stage in UNPARTITIONED_STAGES else self.partition
            skipped = self.tracking.latest_skip(name, partition=partition)
            if skipped is not None:  # the stage ran; its output was not estimable (a finding, not a missing stage)
                from fair_pipeline.platform.tracking import TAG_SKIPPED

                raise StageMissing(f"stage {stage!r} ran{where} (MLflow run {skipped.info.run_id}) but logged no table "
                                   f"{name!r}: {skipped.data.tags.get(TAG_SKIPPED, 'no reason given')}")
            raise StageMissing(f"stage {stage!r} has never logged table {name!r} to MLflow{where}")
        frame, run = found
        absent = [column for column in required if column not in frame.columns]
        if absent:
            raise StageMissing(
                f"table {name!r} from MLflow run {run.info.run_id} lacks columns {absent} (has {list(frame.columns)})"
            )
        self.sources[name] = f"MLflow run {run.info.run_id} ({run.info.run_name})"
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
