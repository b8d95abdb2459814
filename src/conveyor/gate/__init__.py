"""The validation gate: Great Expectations in front of the AI step, bad rows to the review queue.

Importing this package is cheap (no pandas, no Great Expectations): DAG files import
``conveyor.gate.operators.ValidationGateOperator`` at parse time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conveyor.gate.operators import ValidationGateOperator

__all__ = ["ValidationGateOperator"]


def __getattr__(name: str) -> Any:
    if name == "ValidationGateOperator":
        from conveyor.gate.operators import ValidationGateOperator

        return ValidationGateOperator
    raise AttributeError(name)
