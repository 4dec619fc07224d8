"""Colours: the categorical cycle for series (matplotlib's tab10, which readers of the papers' figures know) and
the viridis scale for values in [0, 1] (perceptually uniform, readable in grey and by colour-blind readers)."""
from __future__ import annotations

import numpy as np

CYCLE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")

# viridis at 0, 1/16, ..., 1 (matplotlib's table); values in between are interpolated linearly in RGB
VIRIDIS_STOPS = ("#440154", "#48186a", "#472d7b", "#424086", "#3b528b", "#33638d", "#2c728e", "#26828e", "#21918c",
                 "#1fa088", "#28ae80", "#3fbc73", "#5ec962", "#84d44b", "#addc30", "#d8e219", "#fde725")
_STOP_RGB = np.array([[int(h[i:i + 2], 16) / 255 for i in (1, 3, 5)] for h in VIRIDIS_STOPS])


def viridis(value: float) -> tuple[float, float, float]:
    """RGB in [0, 1] of `value` (clipped to [0, 1]) on the viridis scale."""
    position = float(np.clip(value, 0.0, 1.0)) * (len(_STOP_RGB) - 1)
    below = min(int(position), len(_STOP_RGB) - 2)
    share = position - below
    return tuple(float(c) for c in _STOP_RGB[below] * (1 - share) + _STOP_RGB[below + 1] * share)


def hex_colour(rgb: tuple[float, ...]) -> str:
    return "#" + "".join(f"{int(round(c * 255)):02x}" for c in rgb[:3])


def text_colour_on(rgba: tuple[float, ...]) -> str:
    """Black on light cells (viridis' yellow end), white on dark ones: relative luminance (ITU-R BT.601)."""
    red, green, blue = rgba[:3]
    return "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"
