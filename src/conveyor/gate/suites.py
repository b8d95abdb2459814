"""Expectation suites: Great Expectations 1.x JSON under ``include/expectations/``, plus what the gate needs.

A suite file is a plain GX suite (``name``, ``expectations`` as ``{"type", "kwargs", "meta"}``),
whose ``meta.conveyor`` section tells the gate how to read the input:

.. code-block:: json

    {"meta": {"conveyor": {
        "key_column": "exception_id",
        "columns": {"exception_id": "string", "amount": {"type": "number", "currency_column": "currency"},
                    "currency": "string", "quantity": "integer",
                    "exception_date": {"type": "date", "format": "%Y-%m-%d"}},
        "required_columns": ["exception_id", "amount"],
        "freshness_column": "exception_date",
        "parameters": {"oldest_allowed": {"as_of_minus_days": 365},
                       "known_vendor_ids": {"csv": "data/invoices/vendors.csv", "column": "vendor_id"}},
        "lists": {"line_items": {"columns": {"amount": "number"},
                                 "computed": {"amount_error": "abs(quantity * unit_price - amount)"}}},
        "computed": {"total_difference": "abs(total - line_items__amount__sum)"}
    }}}

* ``columns``: every expected column and its type (``string``, ``number``, ``integer``, ``date``,
  ``datetime``). A value that does not parse as its type is a row-level failure; the parsed
  values are what the expectations see. A number may declare its ``currency`` (an ISO code) or a
  ``currency_column``: a reviewer's correction may then carry that currency's sign
  (:mod:`conveyor.review.numbers`); the feed's values never may.
* ``parameters``: values for the suite's ``{"$PARAMETER": name}`` placeholders, computed per run:
  dates relative to the run's date (``as_of_minus_days``/``as_of_plus_days``), the values of a
  column of a CSV file under ``include/``, or a literal ``value``.
* ``lists`` and ``computed`` (ledger mode, nested AI results): a list field ``F`` becomes
  ``F__count`` and ``F__<column>__sum``/``__max`` columns (also for per-element ``computed``
  expressions); top-level ``computed`` columns are ``DataFrame.eval`` expressions.

Only this module's functions that build GX objects import Great Expectations or pandas.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conveyor.formats import human_format
from conveyor.gate.errors import SuiteError
from conveyor.gate.paths import resolve_path
from conveyor.include import include_dir, resolve

if TYPE_CHECKING:
    import great_expectations as gx

COLUMN_TYPES = frozenset({"string", "number", "integer", "date", "datetime"})
DEFAULT_DATE_FORMATS = {"date": "%Y-%m-%d", "datetime": "ISO8601"}


@dataclass(frozen=True)
class ColumnSpec:
    """One expected column.

    :param name: the column name.
    :param kind: ``string``, ``number``, ``integer``, ``date`` or ``datetime``.
    :param format: the strftime format of ``date``/``datetime`` text (``ISO8601`` for any ISO form).
    :param currency: a number's ISO currency code: the sign a reviewer may type with a correction.
    :param currency_column: the column holding each row's currency code (instead of ``currency``).
    """

    name: str
    kind: str = "string"
    format: str | None = None
    currency: str | None = None
    currency_column: str | None = None

    @property
    def is_text(self) -> bool:
        return self.kind == "string"

    @property
    def is_temporal(self) -> bool:
        return self.kind in ("date", "datetime")

    def describe(self) -> str:
        if self.is_temporal:
            return f"a {self.kind} in the form {human_format(self.format)}"
        return {"number": "a number", "integer": "a whole number"}.get(self.kind, "text")


@dataclass(frozen=True)
class ListSpec:
    """A list-of-objects field (ledger mode), flattened into aggregate columns."""

    name: str
    columns: Mapping[str, ColumnSpec] = field(default_factory=dict)
    computed: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GateSuite:
    """A loaded suite: the GX expectations plus the gate's reading instructions."""

    name: str
    path: Path
    expectations: tuple[Mapping[str, Any], ...]
    columns: Mapping[str, ColumnSpec]
    key_column: str | None = None
    required_columns: tuple[str, ...] = ()
    freshness_column: str | None = None
    parameters: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    lists: Mapping[str, ListSpec] = field(default_factory=dict)
    computed: Mapping[str, str] = field(default_factory=dict)

    def patterns(self) -> dict[str, str]:
        """column -> the regex its values must match (from ``expect_column_values_to_match_regex``)."""
        found: dict[str, str] = {}
        for exp in self.expectations:
            if exp["type"] == "expect_column_values_to_match_regex":
                found.setdefault(exp["kwargs"]["column"], exp["kwargs"]["regex"])
        return found

    def resolve_parameters(
        self, as_of: datetime, overrides: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Values for every ``$PARAMETER`` of the suite on the run's date ``as_of``."""
        import pandas as pd

        day = pd.Timestamp(as_of.date())
        values: dict[str, Any] = {}
        for name, spec in self.parameters.items():
            if "as_of_minus_days" in spec:
                values[name] = day - pd.Timedelta(days=int(spec["as_of_minus_days"]))
            elif "as_of_plus_days" in spec:
                values[name] = day + pd.Timedelta(days=int(spec["as_of_plus_days"]))
            elif "csv" in spec:
                values[name] = _csv_column(resolve_path(spec["csv"]), spec["column"], suite=self.name)
            elif "value" in spec:
                values[name] = spec["value"]
            else:
                raise SuiteError(f"suite {self.name!r}: parameter {name!r} has no known source: {dict(spec)}")
        values.update(overrides or {})
        missing = sorted(self.parameter_names() - values.keys())
        if missing:
            raise SuiteError(f"suite {self.name!r}: no value for $PARAMETER {', '.join(missing)}")
        return values

    def parameter_names(self) -> set[str]:
        names: set[str] = set()

        def walk(value: Any) -> None:
            if isinstance(value, Mapping):
                if "$PARAMETER" in value:
                    names.add(str(value["$PARAMETER"]))
                for v in value.values():
                    walk(v)
            elif isinstance(value, list):
                for v in value:
                    walk(v)

        for exp in self.expectations:
            walk(exp.get("kwargs", {}))
        return names

    def gx_suite(self, extra: Iterable[Mapping[str, Any]] = ()) -> gx.ExpectationSuite:
        """The Great Expectations suite: the file's expectations plus ``extra`` ones."""
        import great_expectations as gx
        from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

        built = []
        for position, exp in enumerate([*self.expectations, *extra], start=1):
            try:
                config = ExpectationConfiguration(
                    type=exp["type"], kwargs=dict(exp.get("kwargs", {})), meta=dict(exp.get("meta") or {})
                )
                built.append(config.to_domain_obj())
            except Exception as exc:  # GX raises several types for a bad configuration
                raise SuiteError(
                    f"suite {self.name!r} ({self.path}): expectation #{position} ({exp.get('type')!r}) "
                    f"is not valid: {exc}"
                ) from None
        return gx.ExpectationSuite(name=self.name, expectations=built)


def suites_dir() -> Path:
    return include_dir() / "expectations"


def load_suite(name_or_path: str) -> GateSuite:
    """Load a suite by name (``<name>.json`` next to the DAG file or in ``include/expectations/``)
    or by path to a JSON file.

    :raises SuiteError: the file is missing, not JSON, or not a suite the gate can use.
    """
    file_name = name_or_path if name_or_path.endswith(".json") else f"{name_or_path}.json"
    try:
        path = resolve(file_name, "expectations")
    except FileNotFoundError as exc:
        known = sorted(p.stem for p in suites_dir().glob("*.json")) if suites_dir().is_dir() else []
        raise SuiteError(
            f"expectation suite {name_or_path!r} not found: {exc}; "
            f"suites in {suites_dir()}: {', '.join(known) or 'none'}"
        ) from None
    if not path.is_file():
        raise SuiteError(f"expectation suite {name_or_path!r} at {path} is not a file")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SuiteError(f"expectation suite {path} is not readable JSON: {exc}") from None
    return parse_suite(raw, path)


def parse_suite(raw: Mapping[str, Any], path: Path) -> GateSuite:
    """A :class:`GateSuite` from the JSON of a suite file (checked, with clear errors)."""
    name = raw.get("name") or path.stem
    expectations = raw.get("expectations")
    if not isinstance(expectations, list) or not expectations:
        raise SuiteError(f"suite {name!r} ({path}): 'expectations' must be a non-empty list")
    for position, exp in enumerate(expectations, start=1):
        if (
            not isinstance(exp, Mapping)
            or "type" not in exp
            or not isinstance(exp.get("kwargs", {}), Mapping)
        ):
            raise SuiteError(f"suite {name!r} ({path}): expectation #{position} needs 'type' and 'kwargs'")
    meta = (raw.get("meta") or {}).get("conveyor") or {}
    columns = _column_specs(meta.get("columns") or {}, suite=name)
    lists = {
        list_name: ListSpec(
            name=list_name,
            columns=_column_specs(spec.get("columns") or {}, suite=name),
            computed=dict(spec.get("computed") or {}),
        )
        for list_name, spec in (meta.get("lists") or {}).items()
    }
    required = tuple(meta.get("required_columns") or columns.keys())
    key_column = meta.get("key_column")
    freshness = meta.get("freshness_column")
    for label, column in (("key_column", key_column), ("freshness_column", freshness)):
        if column is not None and column not in columns:
            raise SuiteError(f"suite {name!r}: {label} {column!r} is not among its declared columns")
    if freshness is not None and not columns[freshness].is_temporal:
        raise SuiteError(f"suite {name!r}: freshness_column {freshness!r} must be a date or datetime column")
    return GateSuite(
        name=name,
        path=path,
        expectations=tuple(dict(e) for e in expectations),
        columns=columns,
        key_column=key_column,
        required_columns=required,
        freshness_column=freshness,
        parameters={k: dict(v) for k, v in (meta.get("parameters") or {}).items()},
        lists=lists,
        computed=dict(meta.get("computed") or {}),
    )


def _column_specs(declared: Mapping[str, Any], *, suite: str) -> dict[str, ColumnSpec]:
    specs: dict[str, ColumnSpec] = {}
    for column, spec in declared.items():
        options: Mapping[str, Any] = {"type": spec} if isinstance(spec, str) else spec
        kind = options.get("type", "string")
        if kind not in COLUMN_TYPES:
            raise SuiteError(
                f"suite {suite!r}: column {column!r} has unknown type {kind!r}; "
                f"use one of {', '.join(sorted(COLUMN_TYPES))}"
            )
        currency, currency_column = options.get("currency"), options.get("currency_column")
        if (currency or currency_column) and kind != "number":
            raise SuiteError(f"suite {suite!r}: column {column!r} declares a currency but is {kind!r}, not a number")
        if currency is not None and not (isinstance(currency, str) and len(currency) == 3 and currency.isalpha()):
            raise SuiteError(f"suite {suite!r}: column {column!r} has currency {currency!r}; use an ISO code (EUR)")
        if currency_column is not None and currency_column not in declared:
            raise SuiteError(
                f"suite {suite!r}: column {column!r} reads its currency from {currency_column!r}, "
                "which the suite does not declare"
            )
        specs[column] = ColumnSpec(column, kind, options.get("format") or DEFAULT_DATE_FORMATS.get(kind),
                                   currency.upper() if currency else None, currency_column)
    return specs


def _csv_column(path: Path, column: str, *, suite: str) -> list[str]:
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            reader = csv.DictReader(fh)
            if column not in (reader.fieldnames or []):
                raise SuiteError(f"suite {suite!r}: {path} has no column {column!r}")
            return sorted({row[column] for row in reader if row[column]})
    except OSError as exc:
        raise SuiteError(f"suite {suite!r}: reference file {path} is not readable: {exc}") from None
