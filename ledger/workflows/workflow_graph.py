"""A run's DAG drawn three ways (``workflow graph``): plain text, Graphviz DOT and Mermaid.

Every drawing shows each step with its kind and status, and labels an edge with its
release mode only when it is ``on_terminal`` (``on_success`` is the default, and the
common case). Steps and edges come in run order, so the same run draws the same text.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from ledger.core.workflows.spec import ReleaseMode, StepKind
from ledger.store.workflow_reads import StepView
from ledger.workflows.workflow_timeline import Edge, WorkflowGraph

FORMATS = ("text", "dot", "mermaid")


def _mode_label(edge: Edge) -> str | None:
    return None if edge.mode is ReleaseMode.ON_SUCCESS else edge.mode.value


def text(graph: WorkflowGraph) -> str:
    """One line per step: ``key (kind, status) <- prerequisite, other [on_terminal]``."""
    prerequisites: dict[str, list[str]] = {}
    for edge in graph.edges:
        label = _mode_label(edge)
        shown = edge.prerequisite if label is None else f"{edge.prerequisite} [{label}]"
        prerequisites.setdefault(edge.dependent, []).append(shown)
    lines = []
    for step in graph.steps:
        line = f"{step.key} ({step.kind.value}, {step.status.value})"
        if step.key in prerequisites:
            line += " <- " + ", ".join(prerequisites[step.key])
        lines.append(line)
    return "\n".join(lines)


def _quoted(value: str) -> str:
    """A DOT string: JSON's escaping of quotes, backslashes and controls is DOT's too."""
    return json.dumps(value, ensure_ascii=False)


def dot(graph: WorkflowGraph, name: str) -> str:
    """A Graphviz digraph: job steps as boxes, external steps as hexagons."""
    lines = [f"digraph {_quoted(name)} {{", "  rankdir=LR;"]
    for step in graph.steps:
        shape = "box" if step.kind is StepKind.JOB else "hexagon"
        label = _quoted(f"{step.key}\n{step.status.value}")  # JSON's \n is DOT's too
        lines.append(f"  {_quoted(step.key)} [shape={shape}, label={label}];")
    for edge in graph.edges:
        mode = _mode_label(edge)
        attributes = "" if mode is None else f" [label={_quoted(mode)}]"
        lines.append(f"  {_quoted(edge.prerequisite)} -> {_quoted(edge.dependent)}{attributes};")
    lines.append("}")
    return "\n".join(lines)


def _mermaid_label(step: StepView) -> str:
    # Mermaid reads entity codes in quoted labels; a quote itself would end the label.
    words = f"{step.key}<br/>{step.status.value}"
    return '"' + words.replace("#", "#35;").replace('"', "#quot;") + '"'


def mermaid(graph: WorkflowGraph) -> str:
    """A Mermaid flowchart; nodes are ``s0``, ``s1``… (step keys may hold any character),
    job steps as rectangles, external steps as hexagons."""
    ids = {step.key: f"s{index}" for index, step in enumerate(graph.steps)}
    lines = ["flowchart LR"]
    for step in graph.steps:
        label = _mermaid_label(step)
        node = f"[{label}]" if step.kind is StepKind.JOB else f"{{{{{label}}}}}"
        lines.append(f"  {ids[step.key]}{node}")
    for edge in graph.edges:
        mode = _mode_label(edge)
        arrow = "-->" if mode is None else f"-->|{mode}|"
        lines.append(f"  {ids[edge.prerequisite]} {arrow} {ids[edge.dependent]}")
    return "\n".join(lines)


def draw(graph: WorkflowGraph, form: str, name: str) -> str:
    """``graph`` drawn in ``form`` (one of :data:`FORMATS`)."""
    drawers: dict[str, Callable[[], str]] = {
        "text": lambda: text(graph),
        "dot": lambda: dot(graph, name),
        "mermaid": lambda: mermaid(graph),
    }
    return drawers[form]()
