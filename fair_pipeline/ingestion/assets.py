"""Ingestion assets: landing Parquet -> validated raw tables (+ quarantine), one day per partition.

On the duckdb engine a day loads in one DuckDB transaction (`loads`); on the spark engine the executors read and
validate the files and Spark writes the raw partition and its quarantine rows (`spark_loads`), with the same
contract SQL (`rules`). The item catalogue is validated in DuckDB on either engine and, on Spark, written again by
the executors from the same files (`spark_catalogue`)."""
# No `from __future__ import annotations`: Dagster reads config/resource types from real annotations.
import dagster as dg
import pandas as pd
from pydantic import Field

from fair_pipeline.ingestion import contract, landing_source, spark_catalogue, spark_loads
from fair_pipeline.ingestion.catalogue_dates import pin_undated_catalogue
from fair_pipeline.ingestion.catalogue_history import DELIVERY_FINGERPRINTS, catalogue_read_since
from fair_pipeline.ingestion.catalogue import CONFLICTING_ID, MISSING_ID
from fair_pipeline.ingestion.fingerprints import combined
from fair_pipeline.ingestion.hash_cache import HashCache
from fair_pipeline.ingestion.loads import LandingFileError, PartitionLoad, load_partition
from fair_pipeline.platform.asset_defaults import OWNERS, POOL
from fair_pipeline.platform.partitions import daily_partitions, single_run
from fair_pipeline.platform.read_history import READ_SINCE
from fair_pipeline.platform.resources import DuckDBWarehouse, LandingZone

REJECTED_SHARE_CHECK = "rejected_share_below_threshold"
# Metadata of each ingestion: the landing fingerprint of every day it loaded (what `run` compares to the landing).
FINGERPRINTS = "landing_fingerprints"


class IngestionConfig(dg.Config):
    max_position: int = Field(50, description="K: positions outside 1..K are rejected.")
    max_rejected_share: float = Field(
        0.01, description="The blocking check fails when a partition rejects more than this share of its rows."
    )
    allow_empty: bool = Field(
        False,
        description="Accept landing files with no rows (a genuinely empty day). Off by default: a zero-row file "
        "is usually a failed export, and loading it would replace the day's rows with nothing.",
    )


def _extras_change(load: PartitionLoad) -> str:
    parts = []
    if load.extras.added_columns:
        parts.append(f"new columns {list(load.extras.added_columns)} added (earlier days NULL)")
    if load.extras.missing_columns:
        parts.append(f"columns {list(load.extras.missing_columns)} missing (NULL for this day)")
    if load.extras.widened_columns:
        parts.append(f"columns widened {list(load.extras.widened_columns)}")
    return "; ".join(parts)


def _extras_quarantined(load: PartitionLoad) -> str:
    return ", ".join(f"{reason}: {n}" for reason, n in load.extras.quarantined_by_reason.items())


def _load_table(loads: list[PartitionLoad]) -> str:
    frame = pd.DataFrame(
        [
            {
                "partition": load.partition_date,
                "accepted": load.accepted,
                "rejected": load.rejected,
                "rejected share": f"{load.rejected_share:.4%}",
                "reasons": ", ".join(f"{reason}: {n}" for reason, n in load.rejected_by_reason.items()) or "-",
                "extras rows": load.extras.rows,
                "extras schema change": _extras_change(load) or "-",
                "extras quarantined": _extras_quarantined(load) or "-",
            }
            for load in loads
        ]
    )
    return frame.to_markdown(index=False)


def _build_impressions_asset(source: str) -> dg.AssetsDefinition:
    key = dg.AssetKey(["raw", f"{source}_impressions"])
    policies = ", ".join(contract.SOURCE_POLICIES[source])

    @dg.asset(
        key=key,
        partitions_def=daily_partitions,
        backfill_policy=single_run,
        pool=POOL,
        group_name="ingestion",
        kinds={"python", "duckdb", "parquet"},
        owners=OWNERS,
        code_version="1",
        description=(
            f"Validated {source} impressions (policies: {policies}) loaded from "
            f"landing/{source}/date=YYYY-MM-DD/*.parquet. Rejected rows go to raw.quarantine with a reason; "
            "re-running a partition replaces exactly that partition in one transaction."
        ),
        check_specs=[
            dg.AssetCheckSpec(
                REJECTED_SHARE_CHECK,
                asset=key,
                blocking=True,
                description="Fails (and blocks downstream) when a partition rejects more than max_rejected_share of its rows.",
            )
        ],
    )
    def _asset(
        context: dg.AssetExecutionContext, config: IngestionConfig, warehouse: DuckDBWarehouse, landing: LandingZone
    ) -> dg.MaterializeResult:
        keys = context.partition_keys
        with warehouse.connect() as con:
            engine = warehouse.engine_for(con)
            files = landing_source.for_engine(engine, landing.location)
            # Check every day's files before writing anything, so a missing day fails the run up front.
            for key_ in keys:
                files.check_day(source, key_)
            # Taken before loading: a file rewritten meanwhile makes the next run load the day again, never the reverse.
            cache = HashCache.beside(context.instance)
            fingerprints = {key_: files.day_fingerprint(source, key_, cache) for key_ in keys}
            cache.save()
            loads = []
            for key_ in keys:
                if engine.name == "duckdb":
                    load = load_partition(con, files.path, source, key_, config.max_position, config.allow_empty)
                else:  # the executors read and validate the files; no row passes through this process or DuckDB
                    load = spark_loads.load_partition(engine, files.loader_landing, source, key_, config.max_position,
                                                      config.allow_empty)
                context.log.info(f"{source} {key_}: {load.accepted} accepted, {load.rejected} rejected on {engine.name}")
                if _extras_change(load):
                    context.log.warning(f"{source} {key_}: extras schema changed: {_extras_change(load)}")
                if load.extras.quarantined:
                    context.log.warning(f"{source} {key_}: {load.extras.quarantined} extras rows quarantined to "
                                        f"raw.extras_quarantine ({_extras_quarantined(load)})")
                loads.append(load)
            table_rows = engine.row_count(("raw", f"{source}_impressions"))
        return dg.MaterializeResult(data_version=dg.DataVersion(combined(fingerprints)),
                                    metadata={FINGERPRINTS: dg.MetadataValue.json(fingerprints),
                                              **_ingestion_metadata(loads, table_rows)},
                                    check_results=[_rejected_share_check(loads, config.max_rejected_share)])

    return _asset


def _ingestion_metadata(loads: list, table_rows: int) -> dict:
    """Row counts, per-day loads, source files, extras schema changes and quarantined extras of one materialization."""
    return {
        "dagster/row_count": sum(load.accepted for load in loads),
        "rejected_rows": sum(load.rejected for load in loads),
        "table_rows_all_partitions": table_rows,
        "partitions": dg.MetadataValue.md(_load_table(loads)),
        "source_files": dg.MetadataValue.json([f for load in loads for f in load.files]),
        "extras_schema_changes": dg.MetadataValue.json(
            {load.partition_date: {"added": list(load.extras.added_columns),
                                   "missing": list(load.extras.missing_columns),
                                   "widened": list(load.extras.widened_columns)}
             for load in loads if _extras_change(load)}),
        "extras_quarantined": dg.MetadataValue.json(
            {load.partition_date: load.extras.quarantined_by_reason for load in loads if load.extras.quarantined}),
    }


def _rejected_share_check(loads: list, max_rejected_share: float) -> dg.AssetCheckResult:
    """The blocking check: fails when the worst day rejects more than `max_rejected_share` of its rows."""
    worst = max(loads, key=lambda load: load.rejected_share)
    return dg.AssetCheckResult(
        check_name=REJECTED_SHARE_CHECK,
        passed=bool(worst.rejected_share <= max_rejected_share),
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            "worst_partition": worst.partition_date,
            "worst_rejected_share": float(worst.rejected_share),
            "threshold": float(max_rejected_share),
            "rejected_rows": sum(load.rejected for load in loads),
        },
        description=(f"worst partition {worst.partition_date}: {worst.rejected_share:.4%} rejected "
                     f"(threshold {max_rejected_share:.2%})"),
    )


observational_impressions = _build_impressions_asset("observational")
randomized_impressions = _build_impressions_asset("randomized")


@dg.asset(
    key=["raw", "items"],
    pool=POOL,
    group_name="ingestion",
    kinds={"python", "duckdb", "parquet"},
    owners=OWNERS,
    code_version="3",
    description="Item catalogues (item_id, group_id, feature columns), one per delivery: landing/items/date=D/*.parquet "
    "holds from D until the next delivery (columns catalogue_date, valid_from, valid_until), and each partition's "
    "stages read the one that holds on their day; an undated landing/items/*.parquet holds on every day, or, next to "
    "dated deliveries, is dated at the first landed day (moved to items/date=D/). Rows without an "
    f"id are quarantined ({MISSING_ID!r}), so is every row of an id delivered with differing rows "
    f"({CONFLICTING_ID!r}); exact copies (the catalogue delivered twice) are kept once and counted. A catalogue "
    "with nothing to keep (no rows, or every row rejected) is refused and the previous one stays.",
)
def items(context: dg.AssetExecutionContext, warehouse: DuckDBWarehouse, landing: LandingZone) -> dg.MaterializeResult:
    with warehouse.connect() as con:
        engine = warehouse.engine_for(con)
        files = landing_source.for_engine(engine, landing.location)
        try:
            # First: the fingerprint is of the files as loaded (a landing read through Spark is never changed).
            pinned = None if files.through_spark else pin_undated_catalogue(files.path)
            cache = HashCache.beside(context.instance)
            fingerprint, by_delivery = files.catalogue_fingerprints(cache)
            cache.save()
            read_since = catalogue_read_since(context.instance, context.asset_key, by_delivery,
                                              context.assets_def.code_versions_by_key[context.asset_key])
            load, read = files.load_catalogue(con)
        except LandingFileError as error:
            raise dg.Failure(description=str(error)) from error
        if engine.name != "duckdb":  # read by the executors: no catalogue row passes through this process
            spark_catalogue.write_items(engine, con, files.loader_landing)
    if load.non_numeric_columns:
        context.log.warning(f"raw.items columns that are not numeric (rankers do not use them): {list(load.non_numeric_columns)}")
    if load.rejected:
        context.log.warning(f"raw.items: {load.rejected} rows quarantined ({load.rejected_by_reason})")
    if pinned:
        context.log.warning(f"the undated catalogue holds from the first landed day: moved to {pinned}")
    if load.exact_copies:
        context.log.info(f"raw.items: {load.exact_copies} exact copies of delivered rows kept once")
    return dg.MaterializeResult(
        data_version=dg.DataVersion(fingerprint),
        metadata={
            FINGERPRINTS: dg.MetadataValue.json({"items": fingerprint}),
            DELIVERY_FINGERPRINTS: dg.MetadataValue.json(by_delivery),
            # Per delivery (and the code), since which materialization it is unchanged: `run` reads one record.
            READ_SINCE: dg.MetadataValue.json(read_since),
            "dagster/row_count": load.accepted,
            "rejected_rows": load.rejected,
            "rejected_by_reason": dg.MetadataValue.json(load.rejected_by_reason),
            "exact_copies_dropped": load.exact_copies,
            "source_files": dg.MetadataValue.json(read),
            "non_numeric_columns": dg.MetadataValue.json(list(load.non_numeric_columns)),
            "deliveries": dg.MetadataValue.json([str(day) if day else "undated" for day in load.delivery_days]),
        }
    )


ingestion_assets = [observational_impressions, randomized_impressions, items]
