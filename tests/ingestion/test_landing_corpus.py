"""The generated landing corpus (fair_pipeline.ingestion.landing_corpus): every day is handled, none silent, lost or
unclear; and the oracle can fail (a validation rule weakened on purpose makes days silent)."""
from __future__ import annotations

import collections
import os

from fair_pipeline.ingestion import extras, extras_corpus, landing_corpus, rules

DAYS = int(os.environ.get("FUZZ_DAYS", "500"))


def test_the_corpus_covers_every_kind_of_defect_and_writer():
    days = landing_corpus.generate(DAYS)
    kinds = collections.Counter(day.kind for day in days)
    assert set(landing_corpus.FILE_DEFECTS) <= set(kinds) and kinds["rows"] >= DAYS // 3
    assert sum(len(day.files) for day in days) >= DAYS
    reasons = collections.Counter(reason for day in days for _, _, reason in day.rows)
    for reason in ("missing item_id", "group_id is NaN", "missing or unparsable ts", "position outside 1..K",
                   "duplicate (request_id, position)"):
        assert reasons[reason] >= 10, reasons


def test_every_generated_day_is_handled(tmp_path):
    counts, problems = landing_corpus.run_corpus(tmp_path, DAYS)
    assert problems == []
    assert counts == {"handled": DAYS}


def test_a_weakened_rule_makes_days_silent(tmp_path, monkeypatch):
    monkeypatch.setattr(rules, "BLANK_ID", r"^[ \t]*\z")  # Unicode blanks pass as ids again
    counts, problems = landing_corpus.run_corpus(tmp_path, 120)
    assert counts["silent"] >= 3, counts
    assert all(outcome == "silent" for _, outcome, _ in problems)


EXTRAS_DAYS = max(DAYS // 5, 60)


def test_every_generated_extras_day_is_handled(tmp_path):
    days = extras_corpus.generate(EXTRAS_DAYS)
    kinds = collections.Counter(day.kind for day in days)
    assert set(kinds) == set(extras_corpus.KINDS) and min(kinds.values()) >= EXTRAS_DAYS // 10, kinds
    reasons = collections.Counter(reason for day in days if day.kind == "extras_keys"
                                  for reason in day.expected.values())
    assert all(reasons[reason] >= 3 for reason in extras_corpus.REASONS.values()), reasons
    counts, problems = extras_corpus.run_corpus(tmp_path, EXTRAS_DAYS)
    assert problems == []
    assert counts == {"handled": EXTRAS_DAYS}


def test_unchecked_extras_keys_make_days_silent(tmp_path, monkeypatch):
    monkeypatch.setattr(extras, "_CHECKED", extras._CHECKED.replace("WHEN NOT known", "WHEN false"))
    counts, _ = extras_corpus.run_corpus(tmp_path, 60)
    assert counts["silent"] >= 3, counts
