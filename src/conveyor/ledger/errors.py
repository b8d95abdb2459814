"""Errors raised by the ledger. Each message names what a person needs to act on."""

from __future__ import annotations

from collections.abc import Mapping

# The ledger's base is declared with the others in conveyor.errors; importable from here too.
from conveyor.errors import LedgerError as LedgerError


class LedgerUnavailable(LedgerError):
    """The ledger database cannot be reached, or was lost mid-transaction (a restart, a crash).

    Transient by definition: a task that meets it fails and Airflow retries it; the API answers
    503 with ``Retry-After``; no item is ever marked failed for it. The message names the host,
    never the password.
    """


class UnknownItem(LedgerError):
    """No item with that id exists (or a bare business key names none, or several).

    :param item_id: what was asked for.
    :param hint: what to try instead, appended to the message ("; did you mean ...?").
    :param candidates: the item ids the hint names.
    """

    def __init__(self, item_id: str, hint: str = "", candidates: tuple[str, ...] = ()) -> None:
        super().__init__(f"unknown item {item_id!r}: no such item in the ledger{hint}")
        self.item_id = item_id
        self.candidates = candidates


class UnknownWorkflow(LedgerError):
    """A workflow name that has no declared status chain."""


class IllegalTransition(LedgerError):
    """A transition that the workflow's table does not allow. Nothing was changed.

    :param workflow: the workflow whose table refused the transition.
    :param to_status: the status that was asked for.
    :param current: item id -> its current status, for every item that cannot make that move.
    """

    def __init__(self, workflow: str, to_status: str, current: Mapping[str, str]) -> None:
        self.workflow = workflow
        self.to_status = to_status
        self.current = dict(current)
        shown = list(self.current.items())[:5]
        listed = "; ".join(f"item {item!r} is {str(status)!r}" for item, status in shown)
        more = f" (and {len(self.current) - len(shown)} more)" if len(self.current) > len(shown) else ""
        super().__init__(
            f"illegal transition in workflow {workflow!r}: {listed}{more}; "
            f"cannot move to {str(to_status)!r}. Nothing was changed."
        )
