"""Comparing audit tables computed two ways (streamed vs in memory, many batches vs one)."""
import numpy as np
import pandas as pd


def assert_tables_close(got: pd.DataFrame, want: pd.DataFrame, name: str) -> None:
    """Labels and counts exactly; floats to 1e-12 relative to the value or to its column's largest value.

    The sweep's and the cluster pass's sums are added in another order when batches differ, so a value that
    is a difference of close ones (a gap, a tail p-value) keeps ~1e-13 of its column's scale, not of itself."""
    floats = [c for c in want.columns if want[c].dtype.kind == "f"]
    pd.testing.assert_frame_equal(got.drop(columns=floats), want.drop(columns=floats), obj=name)
    for c in floats:
        scale = np.nanmax(np.abs(want[c].to_numpy(float)), initial=0.0)
        np.testing.assert_allclose(got[c].to_numpy(float), want[c].to_numpy(float), rtol=1e-12, atol=1e-12 * scale,
                                   equal_nan=True, err_msg=f"{name}.{c}")


def assert_reports_close(got, want) -> None:
    """Every table of two audit reports, the xAUC ones included: labels and counts exactly, floats to 1e-11."""
    pairs = [(got, want, name) for name in ("groups", "pairs", "overall")]
    pairs += [(got.xauc, want.xauc, name) for name in ("pairs", "deltas", "balanced", "balanced_deltas")]
    for a, b, name in pairs:
        a, b = getattr(a, name), getattr(b, name)
        floats = [col for col in b.columns if b[col].dtype.kind == "f"]
        pd.testing.assert_frame_equal(a.drop(columns=floats), b.drop(columns=floats), check_dtype=False, obj=name)
        np.testing.assert_allclose(a[floats].to_numpy(), b[floats].to_numpy(), rtol=1e-11, atol=1e-12, err_msg=name)
