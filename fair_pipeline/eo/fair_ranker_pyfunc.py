"""The `fair-ranker` pyfunc as an MLflow "model from code": MLflow stores this file with every version it logs
and runs it when the version is loaded, so the model holds no pickle, only this code and its data files
(`fair_pipeline.eo.fair_ranker`). It uses only the package's public `fair_pipeline.eo.load_fair_ranker`, so a
version loads after any refactoring of the modules behind it. Never imported by the package itself:
`serving.log_fair_ranker` passes its path."""
import mlflow
import pandas as pd
from mlflow.models import set_model

from fair_pipeline.eo import load_fair_ranker


class FairRankerPyfunc(mlflow.pyfunc.PythonModel):
    """DataFrame(features..., group) -> fair scores."""

    def load_context(self, context) -> None:
        self.model = load_fair_ranker(context.artifacts)

    # A DataFrame hint: MLflow then validates the input's type and stops warning that hints are missing; the
    # signature itself comes from the input example `serving.log_fair_ranker` is given.
    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.Series:
        return self.model.predict(model_input)


set_model(FairRankerPyfunc())
