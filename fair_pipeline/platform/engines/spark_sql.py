"""Renders the project's DuckDB-dialect SQL for Spark SQL, or refuses with a reason.

The SQL stays single-source (dbt_like_sql files and the stages' inline SQL are DuckDB dialect); this step
parses it with sqlglot, fixes the constructs sqlglot would translate wrongly or not at all, and raises
`SparkSqlError` on anything it cannot translate safely. Pure Python: no pyspark.

Fixed explicitly (sqlglot alone gets these wrong, silently):
  read_parquet($p)    sqlglot writes parquet.`p` (a file literally named after the parameter); here it becomes
                      the unqualified table `__file_p`, listed in `file_inputs`, which the engine registers from
                      the path bound to $p (bound, never formatted into SQL)
  AS [NOT] MATERIALIZED  dropped: no Spark syntax, and Spark inlines every CTE
  isfinite / isinf    no such Spark functions: rewritten to NULL-preserving CASE expressions on isnan/abs
  TRY(decode(x))      DuckDB's NULL for bytes that are not UTF-8: Spark's try_validate_utf8(CAST(x AS STRING));
                      decode(x) stays Spark's DECODE(x, 'utf-8'), which fails on such bytes, as DuckDB's does
  schema.table        `schema__table`: the Spark engine keeps each warehouse table as a session view of that name
  $name, ?            Spark's :name / ? markers, bound by `spark.sql(sql, args=...)`
Refused (SparkSqlError names the construct and what to do instead):
  hash(...)           DuckDB's is 64-bit, Spark's HASH 32-bit murmur3: different values and collisions
  CREATE TEMP TABLE   becomes a lazy TEMP VIEW on Spark (re-run at every use); use Warehouse.register_frame
  INSERT without a column list or BY NAME: positional, and Spark puts partition columns last
  DELETE / UPDATE / transactions / several statements: plain Parquet has none; use Warehouse.replace_partition
  TRY(...) of anything else: Spark has only its try_* functions
  other table functions (read_csv, range, ...) and any function sqlglot does not know (it would pass it through
  unchanged and Spark would fail at run time, or worse, resolve it to something else)

Renders are cached per SQL text (a model's code_version is the hash of its text) and renderer version.
"""
from __future__ import annotations

import dataclasses
import functools

import sqlglot
from sqlglot import exp

# Bump when a rule below changes: part of `cache_key`, so a persisted render of older rules is not reused.
RENDERER_VERSION = "3"
FILE_INPUT_PREFIX = "__file_"
VIEW_SEPARATOR = "__"

# Functions sqlglot keeps as unknown (exp.Anonymous) that Spark has with DuckDB's meaning. Empty on purpose:
# a name goes here only with a test showing both engines agree on it.
PORTABLE_UNKNOWN_FUNCTIONS: frozenset[str] = frozenset()


class SparkSqlError(ValueError):
    """A statement that cannot be rendered for Spark safely; the message names the construct."""


@dataclasses.dataclass(frozen=True)
class SparkStatement:
    """A rendered statement: `sql` in Spark dialect; `named` parameters (`:name`) or `positional` count (`?`);
    `file_inputs` maps each table the engine must register (`__file_p`) to the parameter holding its path."""

    sql: str
    named: tuple[str, ...]
    positional: int
    file_inputs: tuple[tuple[str, str], ...]


def spark_view_name(schema: str, table: str) -> str:
    """The session view under which the Spark engine exposes warehouse table schema.table."""
    return f"{schema}{VIEW_SEPARATOR}{table}"


def cache_key(sql: str) -> tuple[str, str, str]:
    return (sqlglot.__version__, RENDERER_VERSION, sql)


def render(sql: str) -> SparkStatement:
    """Render one DuckDB-dialect statement for Spark (cached); raises SparkSqlError when it cannot safely."""
    return _render(cache_key(sql))


@functools.lru_cache(maxsize=2048)
def _render(key: tuple[str, str, str]) -> SparkStatement:
    sql = key[2]
    try:
        statements = [s for s in sqlglot.parse(sql, read="duckdb") if s is not None]
    except sqlglot.errors.ParseError as error:
        raise SparkSqlError(f"cannot parse as DuckDB SQL: {error}; statement: {_excerpt(sql)}") from error
    if len(statements) != 1:
        raise SparkSqlError(f"{len(statements)} statements in one text: Spark runs one at a time and has no "
                            f"multi-statement transactions; statement: {_excerpt(sql)}")
    tree = statements[0]
    _check_statement(tree, sql)
    file_inputs = _replace_file_reads(tree, sql)
    _replace_float_checks(tree)
    _drop_materialization_hints(tree)
    _check_functions(tree, sql)
    _replace_utf8_checks(tree, sql)
    _rename_tables(tree)
    placeholders = list(tree.find_all(exp.Placeholder))
    named = tuple(dict.fromkeys(p.name for p in placeholders if p.args.get("this")))
    positional = sum(1 for p in placeholders if not p.args.get("this"))
    if named and positional:
        raise SparkSqlError(f"mixes $name and ? parameters (Spark binds one kind per statement): {_excerpt(sql)}")
    rendered = tree.sql(dialect="spark", comments=False)
    try:
        sqlglot.parse_one(rendered, read="spark")
    except sqlglot.errors.ParseError as error:
        raise SparkSqlError(f"the Spark rendering does not parse back ({error}): {rendered}") from error
    return SparkStatement(rendered, named, positional, tuple(file_inputs.items()))


def _excerpt(sql: str, limit: int = 160) -> str:
    flat = " ".join(sql.split())
    return flat if len(flat) <= limit else flat[:limit] + " ..."


def _check_statement(tree: exp.Expression, sql: str) -> None:
    if isinstance(tree, (exp.Delete, exp.Update, exp.Transaction, exp.Commit, exp.Rollback, exp.Merge)):
        raise SparkSqlError(f"{tree.key.upper()} has no all-or-nothing equivalent on plain Parquet tables; write "
                            f"through Warehouse.replace_partition / replace_table: {_excerpt(sql)}")
    if isinstance(tree, (exp.Command, exp.Describe, exp.Pragma, exp.Set, exp.Use)):
        raise SparkSqlError(f"{type(tree).__name__} statements are engine-specific (use Warehouse.table_columns "
                            f"and the engine's settings): {_excerpt(sql)}")
    if isinstance(tree, exp.Create) and tree.args.get("kind", "").upper() == "TABLE" \
            and tree.find(exp.TemporaryProperty) is not None:
        raise SparkSqlError("CREATE TEMP TABLE becomes a lazy TEMP VIEW on Spark (its query re-runs at every use); "
                            f"materialize with Warehouse.register_frame instead: {_excerpt(sql)}")
    if isinstance(tree, exp.Insert) and not tree.args.get("by_name") and not isinstance(tree.this, exp.Schema):
        raise SparkSqlError("positional INSERT (no column list, no BY NAME): Spark matches columns by position and "
                            "puts partition columns last; name the columns or use Warehouse.replace_partition: "
                            f"{_excerpt(sql)}")


def _replace_file_reads(tree: exp.Expression, sql: str) -> dict[str, str]:
    inputs: dict[str, str] = {}
    for table in list(tree.find_all(exp.Table)):
        source = table.this
        if not isinstance(source, exp.Func):
            continue
        if not isinstance(source, exp.ReadParquet):
            raise SparkSqlError(f"table function {source.sql('duckdb')} has no safe Spark rendering: {_excerpt(sql)}")
        arguments = [a for a in (source.this, *source.expressions) if a is not None]
        if len(arguments) != 1 or not isinstance(arguments[0], exp.Placeholder) or not arguments[0].args.get("this"):
            raise SparkSqlError(
                f"{source.sql('duckdb')}: only read_parquet($parameter) without options renders for Spark (the path "
                f"bound, never in the SQL text; DuckDB's reader options have no Spark meaning): {_excerpt(sql)}")
        view = FILE_INPUT_PREFIX + arguments[0].name
        inputs[view] = arguments[0].name
        table.set("this", exp.to_identifier(view))
        table.set("db", None)
        table.set("catalog", None)
    return inputs


_FLOAT_CHECKS = {
    # NULL stays NULL (DuckDB's semantics); Spark's isnan(NULL) would be false.
    "isinf": "CASE WHEN __x IS NULL THEN NULL ELSE ABS(__x) = CAST('Infinity' AS DOUBLE) END",
    "isfinite": "CASE WHEN __x IS NULL THEN NULL ELSE NOT ISNAN(__x) AND ABS(__x) <> CAST('Infinity' AS DOUBLE) END",
}


def _function_name(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    if isinstance(node, exp.IsInf):
        return "isinf"
    return None


def _replace_float_checks(tree: exp.Expression) -> None:
    for node in list(tree.find_all(exp.Anonymous, exp.IsInf)):
        name = _function_name(node)
        if name not in _FLOAT_CHECKS:
            continue
        arguments = node.expressions if isinstance(node, exp.Anonymous) else [node.this]
        if len(arguments) != 1:
            raise SparkSqlError(f"{name} takes one argument, got {len(arguments)}")
        template = sqlglot.parse_one(_FLOAT_CHECKS[name], read="spark")
        for column in list(template.find_all(exp.Column)):
            if column.name == "__x":
                column.replace(arguments[0].copy())
        node.replace(exp.Paren(this=template))


def _drop_materialization_hints(tree: exp.Expression) -> None:
    """`AS [NOT] MATERIALIZED` is DuckDB's (and Postgres') hint; Spark's grammar has none and never materializes
    a CTE, which is what NOT MATERIALIZED asks for."""
    for cte in tree.find_all(exp.CTE):
        cte.set("materialized", None)


def _check_functions(tree: exp.Expression, sql: str) -> None:
    for node in tree.find_all(exp.Anonymous):
        name = _function_name(node)
        if name == "hash":
            raise SparkSqlError("hash(): DuckDB's is 64-bit, Spark's HASH is 32-bit murmur3, so values, orders and "
                                f"collisions differ between engines; use md5() for a portable order: {_excerpt(sql)}")
        if name not in PORTABLE_UNKNOWN_FUNCTIONS:
            raise SparkSqlError(f"function {name}() is unknown to sqlglot's DuckDB dialect, so it would reach Spark "
                                f"untranslated: {_excerpt(sql)}")


def _replace_utf8_checks(tree: exp.Expression, sql: str) -> None:
    for node in list(tree.find_all(exp.Try)):
        decoded = node.this
        charset = decoded.args.get("charset") if isinstance(decoded, exp.Decode) else None
        if charset is None or charset.name.lower().replace("-", "") != "utf8":
            raise SparkSqlError(f"TRY({node.this.sql('duckdb')}): Spark has no TRY(); only TRY(decode(x)) renders "
                                f"(as try_validate_utf8): {_excerpt(sql)}")
        text = exp.Cast(this=decoded.this.copy(), to=exp.DataType.build("STRING"))
        node.replace(exp.Anonymous(this="try_validate_utf8", expressions=[text]))


def _rename_tables(tree: exp.Expression) -> None:
    for table in tree.find_all(exp.Table):
        if table.args.get("catalog") is not None:
            raise SparkSqlError(f"three-part table name {table.sql('duckdb')}: the warehouse has schema.table only")
        schema = table.args.get("db")
        if schema is not None:
            table.set("this", exp.to_identifier(spark_view_name(schema.name, table.name)))
            table.set("db", None)
