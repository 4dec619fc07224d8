"""What two reports' findings may legitimately differ in: the time each read the MLflow registry."""
from __future__ import annotations

import re

READ_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC")


def without_read_times(findings: list[dict]) -> list[dict]:
    """The findings with the registry's read time (minute resolution) masked."""
    return [{**f, "text": READ_TIME.sub("<read at>", f["text"])} for f in findings]
