"""Bad input: a clear message naming the policy/position, NaN + warning where a weight is not estimable."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fair_pipeline.position_bias import (
    PositionBiasInputError,
    PositionBiasWarning,
    estimate_from_aggregates,
    estimate_position_bias,
)


def traffic(spec, policy="shuffle", score=None):
    """spec: {position: (clicks, impressions)} -> impressions frame."""
    parts = []
    for position, (clicks, n) in spec.items():
        part = pd.DataFrame({"position": position, "click": [1] * clicks + [0] * (n - clicks)})
        part["score"] = score(position, n) if score else 5.0 - position
        parts.append(part)
    frame = pd.concat(parts, ignore_index=True).assign(policy=policy)
    frame["request_id"] = np.arange(len(frame))
    return frame


def test_position_without_impressions_is_nan_with_a_warning_naming_it():
    frame = traffic({1: (50, 100), 2: (30, 100), 4: (10, 100)})
    with pytest.warns(PositionBiasWarning, match=r"shuffle: position 3: no impressions"):
        result = estimate_position_bias(frame, method="randomized")
    assert np.isnan(result.loc[2, "weight"]) and result.loc[2, "impressions"] == 0
    assert result.loc[3, "weight"] == pytest.approx(0.2)
    assert any("position 3" in note for note in result.attrs["warnings"])


def test_position_without_clicks_is_nan_with_a_warning():
    frame = traffic({1: (50, 100), 2: (0, 100), 3: (10, 100)})
    with pytest.warns(PositionBiasWarning, match=r"shuffle: position 2: 0 clicks"):
        result = estimate_position_bias(frame, method="randomized")
    assert np.isnan(result.loc[1, ["weight", "ci_low", "ci_high", "se"]].astype(float)).all()
    assert result.loc[2, "weight"] == pytest.approx(0.2)


def test_chained_estimator_breaks_at_a_missing_position_and_says_so():
    rng = np.random.default_rng(0)
    frame = traffic({1: (50, 200), 2: (30, 200), 4: (10, 200)}, policy="production",
                    score=lambda p, n: rng.normal(3 - 0.1 * p, 0.3, n))
    with pytest.warns(PositionBiasWarning, match=r"weights from position 3 down are not estimable"):
        result = estimate_position_bias(frame, method="adjacent_pairwise", bin_width=0.1)
    assert np.isfinite(result.loc[1, "weight"]) and result["weight"].iloc[2:].isna().all()


def test_only_one_position_is_an_error():
    with pytest.raises(PositionBiasInputError, match=r"shuffle traffic shows only position\(s\) \[1\]"):
        estimate_position_bias(traffic({1: (5, 10)}), method="randomized")


def test_all_clicks_zero_is_an_error():
    with pytest.raises(PositionBiasInputError, match=r"0 clicks in 300 impressions at every position"):
        estimate_position_bias(traffic({1: (0, 100), 2: (0, 100), 3: (0, 100)}), method="randomized")


def test_no_clicks_at_the_reference_position_is_an_error():
    with pytest.raises(PositionBiasInputError, match=r"0 clicks at position 1"):
        estimate_position_bias(traffic({1: (0, 100), 2: (3, 100)}), method="randomized")


def test_missing_randomized_traffic_names_the_policy():
    frame = traffic({1: (50, 100), 2: (30, 100)}, policy="production")
    with pytest.raises(PositionBiasInputError, match=r"no 'shuffle' impressions.*policies present: \['production'\]"):
        estimate_position_bias(frame, method="randomized")
    with pytest.raises(PositionBiasInputError, match=r"no 'adjacent_swap' impressions"):
        estimate_position_bias(frame.assign(original_position=frame["position"]), method="adjacent_swap")


def test_swap_pair_never_swapped_is_nan_with_a_warning():
    swaps = pd.DataFrame(
        {
            "policy": "adjacent_swap",
            "position": [1, 1, 2, 2, 3],
            "original_position": [1, 2, 1, 2, 3],
            "impressions": [200, 50, 50, 200, 200],
            "clicks": [100, 20, 15, 50, 30],
        }
    )
    with pytest.warns(PositionBiasWarning, match=r"adjacent_swap: position 3: no impressions of items swapped"):
        result = estimate_from_aggregates("adjacent_swap", swaps=swaps)
    assert np.isfinite(result.loc[1, "weight"]) and np.isnan(result.loc[2, "weight"])


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda f: f.drop(columns="click"), r"lacks columns \['click'\]"),
        (lambda f: f.assign(click=2), r"'click' must be 0 or 1; found 2"),
        (lambda f: f.assign(position=f["position"] - 1), r"'position' must hold integers >= 1"),
        (lambda f: f.assign(request_id=0), r"repeat a \(request_id, position\) pair"),
        (lambda f: f.iloc[0:0], r"impressions is empty"),
    ],
)
def test_malformed_impressions_raise_clear_errors(mutate, message):
    frame = traffic({1: (50, 100), 2: (30, 100)})
    with pytest.raises(PositionBiasInputError, match=message):
        estimate_position_bias(mutate(frame), method="randomized")


def test_bad_arguments_raise_clear_errors():
    frame = traffic({1: (50, 100), 2: (30, 100)}, policy="production")
    with pytest.raises(PositionBiasInputError, match=r"unknown method 'ips'"):
        estimate_position_bias(frame, method="ips")
    with pytest.raises(PositionBiasInputError, match=r"bin_width=0.015 must be a positive multiple"):
        estimate_position_bias(frame, method="adjacent_pairwise", bin_width=0.015)
    with pytest.raises(PositionBiasInputError, match=r"truncate=1 must be an integer >= 2"):
        estimate_position_bias(frame, method="adjacent_pairwise", truncate=1)
    with pytest.raises(PositionBiasInputError, match=r"moved an item by more than one slot"):
        estimate_position_bias(frame.assign(policy="adjacent_swap", original_position=5), method="adjacent_swap")
