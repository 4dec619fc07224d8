"""Reproductions of published results on the shipped datasets (scripts with a tested core)."""
