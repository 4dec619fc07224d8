"""Penalized retraining with the conditional-mutual-information proxy (public API, issue 6)."""
from fair_pipeline.core.mi_proxy import MIPenaltyError, mi_proxy
from fair_pipeline.core.penalized import MIPenalizedLogisticRegression
from fair_pipeline.core.penalized_path import PathPoint, lambda_path, lambda_path_stream

__all__ = ["MIPenalizedLogisticRegression", "MIPenaltyError", "PathPoint", "lambda_path", "lambda_path_stream", "mi_proxy"]
