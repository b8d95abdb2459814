"""Why the gate refuses a whole batch. Each message names what a data engineer must fix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The gate's base is declared with the others in conveyor.errors; importable from here too.
from conveyor.errors import GateError as GateError


class BatchRejected(GateError):
    """The batch as a whole cannot pass the gate; retrying cannot fix it.

    :param kind: a short code (``missing_columns``, ``empty``, ``encoding``, ``exception_rate``...)
        kept in the batch record so monitoring can group failures.
    :param reason: one readable sentence (or a few, joined by ``; ``) naming the problem.
    :param detail: structured detail kept with the batch record.
    :param input_hash: the sha256 of the input, when it could be computed.
    """

    def __init__(
        self,
        kind: str,
        reason: str,
        *,
        detail: Mapping[str, Any] | None = None,
        input_hash: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.detail = dict(detail or {})
        self.input_hash = input_hash


class InputChanged(BatchRejected):
    """The run already passed the gate with other input; the earlier batch record is kept as is."""


class RepeatedInput(BatchRejected):
    """The input was already gated in another run (a re-sent extract): nothing new to process."""


class SuiteError(GateError):
    """An expectation suite that cannot be found or loaded (a deployment problem, not a data one)."""
