"""The figures that Dagster metadata links to, read back from MLflow (the asset tests' check of a figure)."""
from __future__ import annotations

from pathlib import Path


def linked_figure(markdown: str, tracking=None) -> bytes:
    """The SVG a figure in Dagster metadata links to (`tracking.figure_link_markdown`), read back from the MLflow
    store; fails if the figure is embedded instead or the link names no logged SVG."""
    import re
    import tempfile
    from urllib.parse import parse_qs, urlparse

    from fair_pipeline.platform.tracking import MLflowTracking
    from tests.charts.svg_reading import parse

    assert "data:image" not in markdown, "figures are linked to MLflow, not embedded in Dagster events"
    found = re.search(r"\]\((http[^)\s]+/get-artifact\?[^)\s]+)\)", markdown)
    assert found, markdown
    query = parse_qs(urlparse(found.group(1)).query)
    client = (tracking or MLflowTracking()).client()
    with tempfile.TemporaryDirectory() as tmp:
        svg = Path(client.download_artifacts(query["run_uuid"][0], query["path"][0], tmp)).read_bytes()
    assert query["path"][0].endswith(".svg"), query
    parse(svg)
    return svg
