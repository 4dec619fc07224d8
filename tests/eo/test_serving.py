"""The fair-ranker pyfunc reproduces transform(base(X)) after logging, registering and loading."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from fair_pipeline.eo import EOInputError, UnseenGroupError, WeightedCDFTransformer
from fair_pipeline.eo.serving import base_scores, log_fair_ranker, production_ranker
from fair_pipeline.ingestion.simulator import SimulationConfig, simulate_items
from fair_pipeline.platform.tracking import point_fluent_api_at, select_fluent_experiment

mlflow = pytest.importorskip("mlflow")


@pytest.fixture()
def tracking(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    assert uri.startswith("sqlite:////")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    point_fluent_api_at(uri)  # an earlier test's MLflowTracking may have pointed the registry elsewhere
    # An explicit artifact location keeps artifacts in tmp_path (the default is relative to the cwd).
    experiment = mlflow.create_experiment("eo-serving", artifact_location=(tmp_path / "artifacts").as_uri())
    select_fluent_experiment(experiment)  # mlflow.set_experiment alone would export MLFLOW_EXPERIMENT_ID
    yield uri  # tests/conftest.py resets MLflow's process-wide URIs after every test


@pytest.fixture(scope="module")
def fitted():
    config = SimulationConfig(n_items=4000, seed=5)
    items = simulate_items(config)
    features = [f"f{k}" for k in range(config.n_features)]
    ranker = production_ranker(config)
    scores = base_scores(ranker, items[features].to_numpy())
    rel = items["relevance"].to_numpy() == 1
    transform = WeightedCDFTransformer(alpha=0.8).fit(scores, items["group_id"], clicks=rel.astype(int))
    return config, items, features, ranker, transform


def test_logged_model_reproduces_transform_of_base_scores(tracking, fitted):
    config, items, features, ranker, transform = fitted
    frame = items[features + ["group_id"]].iloc[:500]
    info = log_fair_ranker(transform, ranker, features, input_example=frame.head(5), alias="champion")
    assert info.registered_model_version == 1
    expected = transform.transform(frame[features].to_numpy() @ np.r_[1.0, 1.0, np.zeros(config.n_features - 2)], frame["group_id"])
    for uri in (info.model_uri, "models:/fair-ranker/1", "models:/fair-ranker@champion"):
        got = mlflow.pyfunc.load_model(uri).predict(frame)
        np.testing.assert_array_equal(np.asarray(got).ravel(), expected)
    requirements = mlflow.pyfunc.get_model_dependencies(info.model_uri)
    text = open(requirements).read()
    assert "scikit-learn==" in text and "numpy==" in text and "mlflow==" in text


def test_sklearn_base_ranker_and_bad_input(tracking, fitted):
    config, items, features, _, transform = fitted
    clf = LogisticRegression(max_iter=200).fit(items[features], items["relevance"])
    margin = clf.decision_function(items[features])
    refit = WeightedCDFTransformer().fit(margin, items["group_id"], clicks=items["relevance"].to_numpy())
    info = log_fair_ranker(refit, clf, features, registered_model_name=None)
    model = mlflow.pyfunc.load_model(info.model_uri)
    frame = items[features + ["group_id"]].iloc[:300]
    np.testing.assert_array_equal(np.asarray(model.predict(frame)).ravel(), refit.transform(margin[:300], frame["group_id"]))
    with pytest.raises(Exception, match=r"lacks columns \['group_id'\]"):
        model.predict(frame.drop(columns="group_id"))
    unseen = frame.assign(group_id="7")
    with pytest.raises(Exception, match=r"groups never seen at fit time: '7' \(300 rows\)"):
        model.predict(unseen)
    with pytest.raises(EOInputError, match="lacks columns"):
        log_fair_ranker(refit, clf, features, input_example=frame.drop(columns="f3"))


def test_models_pickled_before_the_stage_packages_still_load():
    # Registered fair-ranker versions of earlier releases name `fair_pipeline.serving` in their pickles.
    import pickle

    from fair_pipeline.eo.serving import FairRankerModel, LinearRanker

    assert pickle.loads(b"cfair_pipeline.serving\nLinearRanker\n.") is LinearRanker
    assert pickle.loads(b"cfair_pipeline.serving\nFairRankerModel\n.") is FairRankerModel
    from fair_pipeline.eo.piecewise import GroupedInterpolator
    from fair_pipeline.eo.transform import WeightedCDFTransformer as Transformer

    assert pickle.loads(b"cfair_pipeline.core.eo_transform\nWeightedCDFTransformer\n.") is Transformer
    assert pickle.loads(b"cfair_pipeline.core.piecewise\nGroupedInterpolator\n.") is GroupedInterpolator
