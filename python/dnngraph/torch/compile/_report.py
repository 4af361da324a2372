"""What the backend decided for each ATen node of a graph it compiled, and what compiling it
took: ``explain`` prints these, ``collect_reports`` gathers them."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Decision:
    """What became of one ATen node: ``partition`` (index of its fused graph) or None with
    ``reason``. ``piece``: for a node made from part of one ATen op, that part
    (``convolution_backward.grad_weight``), else empty."""

    node: str
    op: str
    partition: int | None
    reason: str
    piece: str = ""


@dataclasses.dataclass
class Report:
    """The decisions for one FX graph (``explain`` prints them)."""

    graph: str
    decisions: list[Decision]
    partitions: list[list[str]]  # ATen node names per fused graph
    # Compile time by phase, in seconds: "plan" (candidates, partitioning and the engine's plan
    # builds), "checks" (measure's timing runs, verify's runs), "inner" (the inner compiler).
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
