"""Run a Great Expectations suite over chunks of rows and turn the results into row findings.

One ephemeral GX context per gate run: a pandas data source, a dataframe asset with a
whole-dataframe batch definition, the suite and a ``ValidationDefinition``. Each chunk is
validated with ``result_format=COMPLETE`` so every failing row comes back by its index (the data
row number), and the offending value is read from the chunk itself.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from conveyor.gate.errors import BatchRejected
from conveyor.gate.failures import Composite, RowFailure, describe, safe_value, show
from conveyor.gate.suites import GateSuite

if TYPE_CHECKING:
    import pandas as pd
    from great_expectations.core import ExpectationValidationResult
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

#: A text cell that a spreadsheet would run as a formula (OWASP "CSV injection"): one starting
#: with = or @ (or a tab / carriage return), or with + or - when the cell is not a plain number
#: ("-12" and "+3.5" pass, "-SUM(A1)" and "+49 30 1234" do not). Written without lookarounds or
#: ``\s`` so pandas runs it in pyarrow's RE2 engine instead of falling back to Python's ``re``.
FORMULA_PATTERN = r"^(?:[=@\t\r]|[+-] *[0-9.,]*[^ 0-9.,]|[+-] *[0-9.,]+ +[^ ]|[+-] *$)"
FORMULA_EXPECTATION = "expect_column_values_to_not_match_regex"

_RESULT_FORMAT = {
    "result_format": "COMPLETE",
    "return_unexpected_index_query": False,
    "partial_unexpected_count": 5,
}


def guard_expectations(
    text_columns: Iterable[str], max_cell_chars: int, suite: GateSuite | None = None
) -> list[dict[str, Any]]:
    """Checks the gate adds for every text column: no formula-like cells, no giant cells.

    A column the suite already confines (a value set, or a fully anchored pattern that starts
    with a letter or digit, like ``^SUP-\\d{4}$``) needs neither: a formula or a 10 MB value fails
    that expectation anyway. A column with its own length expectation skips the size guard.
    """
    confined: set[str] = set()
    length_checked: set[str] = set()
    for exp in suite.expectations if suite is not None else ():
        column = exp.get("kwargs", {}).get("column")
        regex = str(exp.get("kwargs", {}).get("regex", ""))
        if exp["type"] == "expect_column_values_to_be_in_set" or (
            exp["type"] == "expect_column_values_to_match_regex"
            and re.match(r"\^[A-Za-z0-9]", regex)
            and regex.endswith("$")
            and not exp.get("kwargs", {}).get("mostly")
        ):
            confined.add(column)
        if exp["type"] == "expect_column_value_lengths_to_be_between":
            length_checked.add(column)
    guards: list[dict[str, Any]] = []
    for column in text_columns:
        if column in confined:
            continue
        guards.append(
            {
                "type": FORMULA_EXPECTATION,
                "kwargs": {"column": column, "regex": FORMULA_PATTERN},
                "meta": {
                    "message": "{column} {value} starts like a spreadsheet formula "
                    "(possible formula injection)",
                    "conveyor_guard": "formula_injection",
                },
            }
        )
        if column not in length_checked:
            guards.append(
                {
                    "type": "expect_column_value_lengths_to_be_between",
                    "kwargs": {"column": column, "max_value": max_cell_chars},
                    "meta": {"conveyor_guard": "cell_size"},
                }
            )
    return guards


@dataclass
class ExpectationStats:
    """What one expectation found over the whole input (summed over chunks)."""

    expectation: str
    column: str | None
    kwargs: dict[str, Any]
    checked: int = 0
    failed: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "expectation": self.expectation,
            "column": self.column,
            "kwargs": self.kwargs,
            "checked": self.checked,
            "failed": self.failed,
            "examples": self.examples,
        }


class SuiteValidator:
    """A suite bound to an ephemeral GX context, ready to validate chunks.

    :param suite: the loaded suite.
    :param parameters: values of the suite's ``$PARAMETER`` placeholders for this run.
    :param extra: expectations added for this input (the gate's guards).
    """

    def __init__(
        self,
        suite: GateSuite,
        *,
        parameters: Mapping[str, Any],
        extra: Iterable[Mapping[str, Any]] = (),
    ) -> None:
        os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
        import great_expectations as gx
        from great_expectations.data_context.types.base import (
            DataContextConfig,
            InMemoryStoreBackendDefaults,
            ProgressBarsConfig,
        )

        self.suite = suite
        self.parameters = dict(parameters)
        config = DataContextConfig(
            store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
            analytics_enabled=False,
            progress_bars=ProgressBarsConfig(globally=False),
        )
        context = gx.get_context(mode="ephemeral", project_config=config)
        asset = context.data_sources.add_pandas(name="conveyor_gate").add_dataframe_asset(name=suite.name)
        self.batch_definition = asset.add_batch_definition_whole_dataframe("chunk")
        gx_suite = context.suites.add(suite.gx_suite(extra))
        self.definition = context.validation_definitions.add(
            gx.ValidationDefinition(
                name=f"conveyor_gate_{suite.name}", data=self.batch_definition, suite=gx_suite
            )
        )
        self.stats: dict[tuple[str, str | None, str], ExpectationStats] = {}

    def validate(self, frame: pd.DataFrame) -> dict[int, list[RowFailure]]:
        """Findings per data row of one chunk (rows that pass are absent).

        :raises BatchRejected: an expectation could not run (wrong type for its column...) or a
            table-level expectation of the suite failed.
        """
        result = self.definition.run(
            batch_parameters={"dataframe": frame},
            expectation_parameters=self.parameters,
            result_format=_RESULT_FORMAT,
        )
        findings: dict[int, list[RowFailure]] = {}
        for er in result.results:
            config = self._check_ran(er)
            kwargs = dict(config.kwargs)
            meta = dict(config.meta or {})
            column = kwargs.get("column") or kwargs.get("column_A")
            res = er.result or {}
            indexes = res.get("unexpected_index_list")
            stats = self._stats_for(config)
            stats.checked += int(res.get("element_count") or len(frame))
            if er.success:
                continue
            if indexes is None:
                observed = res.get("observed_value")
                raise BatchRejected(
                    "suite_table_check",
                    f"table check {config.type} failed (observed {show(observed)})",
                    detail={
                        "expectation": config.type,
                        "kwargs": _jsonable(kwargs),
                        "observed": safe_value(observed),
                    },
                )
            stats.failed += len(indexes)
            for index in indexes:
                row = int(index["index"] if isinstance(index, Mapping) else index)
                value = self._value(frame, row, config.type, kwargs)
                message = describe(config.type, kwargs, meta, value, parameters=self.parameters)
                failure = RowFailure(row, config.type, column, safe_value(value), message)
                findings.setdefault(row, []).append(failure)
                if len(stats.examples) < 5:
                    stats.examples.append({"row": row, "value": safe_value(value), "message": message})
        return findings

    def _stats_for(self, config: ExpectationConfiguration) -> ExpectationStats:
        kwargs = dict(config.kwargs)
        column = kwargs.get("column") or kwargs.get("column_A")
        key = (config.type, column, repr(sorted(kwargs.items(), key=lambda kv: kv[0])))
        stats = self.stats.get(key)
        if stats is None:
            stats = self.stats[key] = ExpectationStats(config.type, column, _jsonable(kwargs))
        return stats

    @staticmethod
    def _check_ran(er: ExpectationValidationResult) -> ExpectationConfiguration:
        """The expectation a result is for, once it is known to have run."""
        config = er.expectation_config
        if config is None:  # GX attaches it to every result of a suite run; without it nothing can be routed
            raise BatchRejected("suite_error", "a result of the expectation suite names no expectation")
        if _raised(er.exception_info):
            column = config.kwargs.get("column") or config.kwargs.get("column_A")
            raise BatchRejected(
                "suite_error",
                f"expectation {config.type} on {column or 'the table'} could not run: "
                f"{_exception_message(er.exception_info)}",
                detail={"expectation": config.type, "kwargs": _jsonable(dict(config.kwargs))},
            )
        return config

    @staticmethod
    def _value(frame: pd.DataFrame, row: int, expectation: str, kwargs: Mapping[str, Any]) -> Any:
        if "column" in kwargs:
            return frame.at[row, kwargs["column"]]
        if "column_A" in kwargs:
            a, b = kwargs["column_A"], kwargs["column_B"]
            return Composite(f"{a} {show(frame.at[row, a])}, {b} {show(frame.at[row, b])}")
        columns = kwargs.get("column_list") or []
        return Composite(", ".join(f"{c} {show(frame.at[row, c])}" for c in columns))

    def expectation_report(self) -> list[dict[str, Any]]:
        """Every expectation with its checked/failed counts and a few examples (the batch's full result)."""
        return [s.as_json() for s in self.stats.values()]


def _raised(info: Any) -> bool:
    if not info:
        return False
    if "raised_exception" in info:
        return bool(info["raised_exception"])
    return any(_raised(v) for v in info.values() if isinstance(v, Mapping))


def _exception_message(info: Any) -> str:
    if "exception_message" in info and info.get("raised_exception"):
        return str(info["exception_message"]).strip().splitlines()[-1]
    for value in info.values():
        if isinstance(value, Mapping) and _raised(value):
            return _exception_message(value)
    return "unknown error"


def _jsonable(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in kwargs.items():
        if isinstance(value, (list, tuple, set)):
            out[key] = [safe_value(v) for v in value]
        elif isinstance(value, Mapping):
            out[key] = {k: safe_value(v) for k, v in value.items()}
        else:
            out[key] = safe_value(value)
    return out
