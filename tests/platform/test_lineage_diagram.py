"""The README's pipeline picture, generated from a Definitions' asset groups."""
import dagster as dg
import pytest

from fair_pipeline.platform.lineage_diagram import _topological, group_edges, mermaid


@dg.asset(group_name="ingestion")
def raw_rows():
    return 1


@dg.asset(group_name="audit")
def audit_table(raw_rows):
    return raw_rows


@dg.asset(group_name="audit")
def audit_summary(audit_table, raw_rows):
    return audit_table


def test_one_edge_per_pair_of_groups_and_none_inside_a_group():
    groups, edges = group_edges(dg.Definitions(assets=[audit_summary, audit_table, raw_rows]))
    assert groups == ["ingestion", "audit"] and edges == [("ingestion", "audit")]
    assert mermaid(dg.Definitions(assets=[raw_rows, audit_table])).splitlines()[-2:] == ["  ingestion --> audit", "```"]


def test_a_group_without_a_summary_is_refused_by_name():
    @dg.asset(group_name="mystery")
    def orphan():
        return 1

    with pytest.raises(ValueError, match=r"asset groups without a summary .*\['mystery'\]"):
        mermaid(dg.Definitions(assets=[orphan]))


def test_groups_that_read_each_other_are_refused():
    with pytest.raises(ValueError, match="cycle"):
        _topological(["a", "b"], [("a", "b"), ("b", "a")])
