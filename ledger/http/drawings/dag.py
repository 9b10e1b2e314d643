"""A workflow run's steps laid out as a DAG: each step in the layer of its longest path from
a root (a step with no prerequisite is in layer 0; any other one layer right of its deepest
prerequisite), the steps of a layer stacked in run order, each edge a curve from the
prerequisite's right side to the dependent's left.

Pure: (key, prerequisites) pairs in, coordinates out; the SVG text is the template's
(``templates/fragments/workflow_dag.svg``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

NODE_WIDTH = 150.0
NODE_HEIGHT = 44.0
COLUMN = 210.0
"""Horizontal distance between layers (a node's width plus room for the edges)."""
ROW = 64.0
MARGIN = 16.0


class Node(NamedTuple):
    key: str
    layer: int
    row: int
    x: float
    y: float


class EdgePath(NamedTuple):
    prerequisite: str
    dependent: str
    path: str
    """An SVG path's ``d``: a cubic curve between the two nodes' facing sides."""


class DagDrawing(NamedTuple):
    width: float
    height: float
    node_width: float
    node_height: float
    nodes: list[Node]
    edges: list[EdgePath]


def layers(steps: Sequence[tuple[str, Sequence[str]]]) -> dict[str, int]:
    """Each step's layer: the number of edges on its longest path from a root. A
    prerequisite that names no step is ignored (a run's spec is checked acyclic and complete
    when it is submitted; a drawing must not fail on a bad one, so a cycle's steps are
    placed after what they depend on outside it)."""
    wanted = {key: [p for p in prerequisites if p] for key, prerequisites in steps}
    depth: dict[str, int] = {}
    visiting: set[str] = set()

    def depth_of(key: str) -> int:
        if key in depth:
            return depth[key]
        visiting.add(key)
        known = [p for p in wanted.get(key, []) if p in wanted and p not in visiting]
        result = 1 + max((depth_of(p) for p in known), default=-1)
        visiting.discard(key)
        depth[key] = result
        return result

    for key, _ in steps:
        depth_of(key)
    return {key: depth[key] for key, _ in steps}


def layout(steps: Sequence[tuple[str, Sequence[str]]]) -> DagDrawing:
    """Lay out steps given as (key, prerequisites), in run order."""
    layer_of = layers(steps)
    rows_used: dict[int, int] = {}
    nodes: dict[str, Node] = {}
    for key, _ in steps:
        layer = layer_of[key]
        row = rows_used.get(layer, 0)
        rows_used[layer] = row + 1
        nodes[key] = Node(key, layer, row, MARGIN + layer * COLUMN, MARGIN + row * ROW)
    edges = []
    for key, prerequisites in steps:
        for prerequisite in prerequisites:
            if prerequisite in nodes:
                edges.append(EdgePath(prerequisite, key, _curve(nodes[prerequisite], nodes[key])))
    columns = max(layer_of.values(), default=-1) + 1
    rows = max(rows_used.values(), default=0)
    width = 2 * MARGIN + max(columns - 1, 0) * COLUMN + NODE_WIDTH
    height = 2 * MARGIN + max(rows - 1, 0) * ROW + NODE_HEIGHT
    return DagDrawing(width, height, NODE_WIDTH, NODE_HEIGHT, list(nodes.values()), edges)


def _curve(source: Node, target: Node) -> str:
    x1, y1 = source.x + NODE_WIDTH, source.y + NODE_HEIGHT / 2
    x2, y2 = target.x, target.y + NODE_HEIGHT / 2
    bend = (x2 - x1) / 2
    return f"M{x1:g},{y1:g} C{x1 + bend:g},{y1:g} {x2 - bend:g},{y2:g} {x2:g},{y2:g}"
