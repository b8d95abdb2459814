"""Reading ``EXPLAIN (FORMAT JSON)`` plans in the plan-shape tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of a plan tree, parents before their children."""
    yield node
    for child in node.get("Plans", ()):
        yield from plan_nodes(child)
