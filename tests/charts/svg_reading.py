"""Reading a rendered chart back: its panels, marks (by kind and series), legend and texts, from the SVG."""
from __future__ import annotations

import xml.etree.ElementTree as ElementTree

SVG = "{http://www.w3.org/2000/svg}"


def parse(data: bytes) -> ElementTree.Element:
    root = ElementTree.fromstring(data)
    assert root.tag == f"{SVG}svg", root.tag
    return root


def panels(root: ElementTree.Element) -> list[ElementTree.Element]:
    return [g for g in root.iter(f"{SVG}g") if g.get("class") == "panel"]


def marks(element: ElementTree.Element, kind: str) -> list[ElementTree.Element]:
    return [g for g in element.iter(f"{SVG}g") if g.get("class") == kind]


def legend_labels(root: ElementTree.Element) -> list[str]:
    legends = [g for g in root.iter(f"{SVG}g") if g.get("class") == "legend"]
    return [t.text for legend in legends for t in legend.findall(f"{SVG}text")]


def texts(element: ElementTree.Element) -> list[str]:
    return [t.text for t in element.iter(f"{SVG}text")]


def points(polyline: ElementTree.Element) -> list[tuple[float, float]]:
    return [tuple(float(v) for v in pair.split(",")) for pair in polyline.get("points").split()]
