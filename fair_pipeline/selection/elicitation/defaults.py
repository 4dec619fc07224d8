"""Defaults of the elicitation that light callers need without importing the solvers (the CLI's help)."""

DEFAULT_RADIUS = 0.2  # radius of the feasible sphere around o used in the paper's experiments

# What `fair-pipeline elicit` uses: keyword arguments of `elicit_fair_quadratic_metric` for a person
# (adaptive questions with a visible difference, "about the same" below 2% relative cost, at most 40
# answers; see `adaptive.py`).  The answer model assumes 10% of clear answers are slips, twice what a
# careful person makes: with 5% the posterior took two early slips for the truth and stopped too soon.
INTERACTIVE_DEFAULTS = {
    "method": "adaptive",
    "resolution": 0.02,
    "error_rate": 0.1,
    "max_answers": 40,
    "target_agreement": 0.97,
}

# A question shows 2 x m x k rates and the metric has C(m, 2) disparity matrices; beyond 4 groups a
# person cannot weigh one profile against another, and 40 answers no longer pin the metric down.
MAX_INTERACTIVE_GROUPS = 4
