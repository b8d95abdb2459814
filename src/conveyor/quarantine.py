"""What a gate records when it quarantines an item: the contract between the gate and review.

The gate writes a :class:`QuarantineDetail` on the item's move to ``quarantined`` (the audit row's
``detail``); the review queue reads it back from the item's history to build the correction
form, coerce a correction to the columns' types and refuse an approval a person may not give. The
API server has no suite file, so this is all it knows of the gate. Neither side imports the other:
both import this module.

The JSON (:meth:`QuarantineDetail.as_json`) is what ledgers hold, also from earlier versions;
:meth:`QuarantineDetail.from_json` reads any of them, and a part it does not recognise reads as
absent (no check, no contract) rather than failing a reviewer's page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

#: The item field a gate validated: a correction lands there and is validated there again.
GatedField = Literal["payload", "ai_result"]


@dataclass(frozen=True)
class ColumnContract:
    """One typed column of a suite: ``type`` is ``string``, ``number``, ``integer``, ``boolean`` or
    ``date``; ``format`` is a date's strftime form (None: ISO 8601); a number's ``currency`` (an ISO
    code) or ``currency_column`` (the field holding each item's code) says which currency sign a
    person may type with it."""

    type: str = "string"
    format: str | None = None
    currency: str | None = None
    currency_column: str | None = None

    def as_json(self) -> dict[str, Any]:
        optional = {"format": self.format, "currency": self.currency, "currency_column": self.currency_column}
        return {"type": self.type, **{key: value for key, value in optional.items() if value}}

    @classmethod
    def from_json(cls, spec: Mapping[str, Any]) -> ColumnContract:
        return cls(str(spec.get("type") or "string"), spec.get("format") or None,
                   spec.get("currency") or None, spec.get("currency_column") or None)

    def currency_of(self, row: Mapping[str, Any]) -> str | None:
        """The item's currency code, as the column declares it (None: none declared or none held)."""
        held = row.get(self.currency_column) if self.currency_column else None
        return held if isinstance(held, str) and held.strip() else self.currency


@dataclass(frozen=True)
class InputContract:
    """A suite's hard contract: what a correction is coerced to and an approval is checked against.

    :param columns: the typed columns, by name.
    :param required: the fields that may not be empty (a person cannot waive them).
    """

    columns: Mapping[str, ColumnContract] = field(default_factory=dict)
    required: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"columns": {n: c.as_json() for n, c in self.columns.items()}, "required": list(self.required)}

    @classmethod
    def from_json(cls, data: object) -> InputContract | None:
        if not isinstance(data, Mapping):
            return None
        columns = data.get("columns")
        return cls(
            columns={
                str(name): ColumnContract.from_json(spec)
                for name, spec in (columns.items() if isinstance(columns, Mapping) else ())
                if isinstance(spec, Mapping)
            },
            required=tuple(str(r) for r in _sequence(data.get("required"))),
        )


@dataclass(frozen=True)
class RecordedCheck:
    """One finding of the gate on the item, and whether a person may approve the item despite it."""

    column: str | None
    expectation: str
    message: str
    waivable: bool

    def as_json(self) -> dict[str, Any]:
        return {"column": self.column, "expectation": self.expectation, "message": self.message,
                "waivable": self.waivable}  # fmt: skip


@dataclass(frozen=True)
class QuarantineDetail:
    """What the gate recorded on an item's move to ``quarantined``.

    :param gate: the gate step's name (its task id), which validates a correction again.
    :param suite: the suite it validated with.
    :param field: the item field it read.
    :param checks: its findings on the item.
    :param contract: the suite's contract (None in a ledger older than contracts).
    """

    gate: str | None = None
    suite: str | None = None
    field: GatedField = "payload"
    checks: tuple[RecordedCheck, ...] = ()
    contract: InputContract | None = None

    @property
    def failing_columns(self) -> set[str]:
        return {c.column for c in self.checks if c.column}

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"field": self.field, "checks": [c.as_json() for c in self.checks]}
        data.update({k: v for k, v in (("gate", self.gate), ("suite", self.suite)) if v is not None})
        if self.contract is not None:
            data["contract"] = self.contract.as_json()
        return data

    @classmethod
    def from_json(cls, data: object) -> QuarantineDetail:
        """The detail as a ledger holds it (any version; anything else reads as an empty detail)."""
        if not isinstance(data, Mapping):
            return cls()
        return cls(
            gate=_text(data.get("gate")),
            suite=_text(data.get("suite")),
            field="ai_result" if data.get("field") == "ai_result" else "payload",
            checks=tuple(
                RecordedCheck(_text(c.get("column")), str(c.get("expectation") or ""), str(c.get("message") or ""),
                              c.get("waivable") is not False)  # fmt: skip
                for c in _sequence(data.get("checks"))
                if isinstance(c, Mapping)
            ),
            contract=InputContract.from_json(data.get("contract")),
        )


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _sequence(value: object) -> Sequence[Any]:
    return value if isinstance(value, list | tuple) else ()
