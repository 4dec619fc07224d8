"""Penalized logistic regression with the conditional-mutual-information proxy (pure numpy/scipy/sklearn)."""
