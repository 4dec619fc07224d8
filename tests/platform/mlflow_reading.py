"""Reading back what a run logged for people (tests only: stages and the report read the warehouse)."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pandas as pd


def logged_table(client, run_id: str, name: str) -> pd.DataFrame:
    """Table `name` logged by `TrackedRun.log_table`, as written (JSON: NaN is null, read back as NaN in a numeric column; Python's parser keeps subnormal
    doubles such as a p-value of 1e-308)."""
    with tempfile.TemporaryDirectory() as tmp:
        split = json.loads(Path(client.download_artifacts(run_id, f"tables/{name}.json", tmp)).read_text())
    return pd.DataFrame(split["data"], columns=split["columns"])
