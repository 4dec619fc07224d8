"""How commands speak: one prefixed line per message, flushed (a run's progress interleaves with Dagster's)."""
from __future__ import annotations


def say(message: str) -> None:
    print(f"[fair-pipeline] {message}", flush=True)
