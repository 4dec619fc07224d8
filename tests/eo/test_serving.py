"""The fair-ranker pyfunc reproduces transform(base(X)) after logging, registering and loading; its files hold
data and model code only (no pickle), so a version loads after the modules behind it are renamed, in a fresh
interpreter that has only site-packages, and in a fresh virtualenv that has only the package and its dependencies."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from fair_pipeline.eo import EOInputError, UnseenGroupError, WeightedCDFTransformer
from fair_pipeline.eo.fair_ranker import base_scores
from fair_pipeline.eo.serving import log_fair_ranker, production_ranker
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


PICKLE_MAGIC = b"\x80"  # protocol 2+ pickles (and cloudpickle's) start with PROTO


def _model_files(model_uri: str) -> dict[str, bytes]:
    root = Path(mlflow.artifacts.download_artifacts(model_uri))
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()
            and "__pycache__" not in p.parts}


def test_a_logged_version_holds_data_and_code_and_no_pickle(tracking, fitted):
    config, items, features, ranker, transform = fitted
    clf = LogisticRegression(max_iter=200).fit(items[features], items["relevance"])
    for base in (ranker, clf):
        info = log_fair_ranker(transform, base, features, registered_model_name=None)
        files = _model_files(info.model_uri)
        pickles = [name for name, data in files.items() if name.endswith((".pkl", ".pickle")) or data[:1] == PICKLE_MAGIC]
        assert not pickles, pickles
        data = {name for name in files if name.startswith("artifacts/")}
        expected = "artifacts/base_ranker.json" if base is ranker else "artifacts/base_ranker.skops"
        assert data == {"artifacts/eo_transform.json", "artifacts/serving.json", expected}, data
        assert "fair_ranker_pyfunc.py" in files  # the model code MLflow runs when loading
        assert "cloudpickle" not in files["requirements.txt"].decode() and "skops==" in files["requirements.txt"].decode()


class _HandMadeRanker:
    def decision_function(self, X):
        return np.asarray(X, dtype=float).sum(axis=1)


def test_a_base_ranker_that_would_need_an_untrusted_type_is_refused_before_logging(tracking, fitted):
    _, items, features, _, transform = fitted
    with pytest.raises(EOInputError, match=r"_HandMadeRanker cannot be saved as data: .*untrusted types .*_HandMadeRanker"):
        log_fair_ranker(transform, _HandMadeRanker(), features, registered_model_name=None)
    assert not mlflow.search_runs(search_all_experiments=True, output_format="list") or all(
        not mlflow.MlflowClient().list_artifacts(run.info.run_id)
        for run in mlflow.search_runs(search_all_experiments=True, output_format="list"))


# Loads models:/fair-ranker/1 and prints its scores; pickle.load/loads raise, so nothing may be unpickled.
LOAD_AND_SCORE = """
import json, pickle, sys
import pandas as pd

def refuse(*args, **kwargs):
    raise AssertionError("a pickle was loaded")

pickle.load = pickle.loads = refuse
import mlflow
import fair_pipeline
model = mlflow.pyfunc.load_model("models:/fair-ranker/1")
frame = pd.read_parquet(sys.argv[1])
print(json.dumps({"package": fair_pipeline.__file__, "modules": sorted(m for m in sys.modules if m.startswith("fair_pipeline.eo")),
                  "scores": model.predict(frame).tolist()}))
"""


def _load_in_subprocess(tracking: str, frame: pd.DataFrame, cwd: Path, *python_args: str, pythonpath: str | None = None,
                        python: str = sys.executable):
    frame_path = cwd / "frame.parquet"
    frame.to_parquet(frame_path)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MLFLOW_", "PYTHON"))}
    env["MLFLOW_TRACKING_URI"] = tracking
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    result = subprocess.run([python, *python_args, "-c", LOAD_AND_SCORE, str(frame_path)], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _renamed_package_copy(destination: Path) -> Path:
    """A copy of the package in which the modules that defined the logged model's parts have other names."""
    package = destination / "fair_pipeline"
    shutil.copytree(Path(__import__("fair_pipeline").__file__).parent, package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    renames = {"eo/transform.py": "eo/_cdf_transform.py", "eo/fair_ranker.py": "eo/_ranker_files.py",
               "eo/serving.py": "eo/_mlflow_logging.py"}
    for old, new in renames.items():
        (package / old).rename(package / new)
    for path in package.rglob("*.py"):
        text = path.read_text()
        for old, new in renames.items():
            text = text.replace("fair_pipeline." + old[:-3].replace("/", "."), "fair_pipeline." + new[:-3].replace("/", "."))
        path.write_text(text)
    return destination


def test_a_registered_version_loads_after_its_modules_are_renamed(tracking, fitted, tmp_path):
    config, items, features, ranker, transform = fitted
    frame = items[features + ["group_id"]].iloc[:200].reset_index(drop=True)
    log_fair_ranker(transform, ranker, features)
    expected = transform.transform(base_scores(ranker, frame[features]), frame["group_id"])
    root = _renamed_package_copy(tmp_path / "renamed")
    loaded = _load_in_subprocess(tracking, frame, tmp_path, pythonpath=str(root))
    assert loaded["package"].startswith(str(root))  # the renamed copy, not the installed package
    assert "fair_pipeline.eo.transform" not in loaded["modules"] and "fair_pipeline.eo._cdf_transform" in loaded["modules"]
    np.testing.assert_array_equal(loaded["scores"], expected)


def test_a_registered_version_loads_in_a_fresh_interpreter_with_only_site_packages(tracking, fitted, tmp_path):
    _, items, features, _, transform = fitted
    clf = LogisticRegression(max_iter=200).fit(items[features], items["relevance"])
    margin = clf.decision_function(items[features])
    refit = WeightedCDFTransformer().fit(margin, items["group_id"], clicks=items["relevance"].to_numpy())
    log_fair_ranker(refit, clf, features)
    frame = items[features + ["group_id"]].iloc[:200].reset_index(drop=True)
    # -I: no PYTHONPATH, no user site, not the current directory: the interpreter's site-packages only.
    loaded = _load_in_subprocess(tracking, frame, tmp_path, "-I")
    np.testing.assert_array_equal(loaded["scores"], refit.transform(margin[:200], frame["group_id"]))


def _fresh_virtualenv_with_the_package(root: Path) -> Path:
    """A new virtualenv holding a copy of the package's files (what installing its wheel puts in site-packages), its
    dependencies reached through a .pth line: no source tree, no editable finder, nothing else of this checkout."""
    import sysconfig
    import venv

    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # A directory named in a .pth file joins sys.path, but its own .pth files (the editable finder's) are not run.
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    shutil.copytree(Path(__import__("fair_pipeline").__file__).parent, site / "fair_pipeline",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return python


def test_a_registered_version_loads_in_a_fresh_virtualenv_that_has_only_the_package(tracking, fitted, tmp_path):
    config, items, features, ranker, transform = fitted
    frame = items[features + ["group_id"]].iloc[:200].reset_index(drop=True)
    log_fair_ranker(transform, ranker, features)
    python = _fresh_virtualenv_with_the_package(tmp_path / "venv")
    loaded = _load_in_subprocess(tracking, frame, tmp_path, "-I", python=str(python))
    assert loaded["package"].startswith(str(tmp_path / "venv"))  # the fresh environment's copy
    np.testing.assert_array_equal(loaded["scores"], transform.transform(base_scores(ranker, frame[features]),
                                                                        frame["group_id"]))
