"""Defaults of the elicitation that light callers need without importing the solvers (the CLI's help)."""

DEFAULT_RADIUS = 0.2  # radius of the feasible sphere around o used in the paper's experiments
