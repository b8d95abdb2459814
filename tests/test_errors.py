"""One error root: every exception class Conveyor defines derives from ``ConveyorError`` through its
concern's base, keeps the builtin and Airflow bases callers rely on, and is importable where it was."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import conveyor
from conveyor import errors

#: Every module of the package is imported in a child process (the plugin, the quickstart, GX...),
#: so this test's process keeps its own state; it prints each exception class and its bases.
_LIST_EXCEPTIONS = """
import importlib, inspect, json, pkgutil, conveyor
found = {}
for info in pkgutil.walk_packages(conveyor.__path__, "conveyor."):
    module = importlib.import_module(info.name)
    for obj in vars(module).values():
        if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__.startswith("conveyor"):
            found[f"{obj.__module__}.{obj.__qualname__}"] = [f"{b.__module__}.{b.__qualname__}" for b in obj.__mro__]
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def exception_classes() -> dict[str, list[str]]:
    done = subprocess.run([sys.executable, "-c", _LIST_EXCEPTIONS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_exception_class_of_the_package_derives_from_conveyor_error(exception_classes):
    assert len(exception_classes) >= 30  # the walk imported the whole package, not a corner of it
    outside = sorted(name for name, mro in exception_classes.items() if "conveyor.errors.ConveyorError" not in mro)
    assert outside == [], "derive these from their concern's base in conveyor.errors: " + ", ".join(outside)


@pytest.mark.parametrize(
    ("name", "kept"),
    [
        # Airflow fails these without a retry: the behaviour the base exists for.
        ("conveyor.effects.publish.UnrenderableItems", "airflow.sdk.exceptions.AirflowFailException"),
        # Callers (the CLI, the review API, DAG code) catch these as ValueError / RuntimeError.
        ("conveyor.review.errors.InvalidDecision", "builtins.ValueError"),
        ("conveyor.review.input_guard.InputRejected", "builtins.ValueError"),
        ("conveyor.ledger.values.UnstorableValue", "builtins.ValueError"),
        ("conveyor.ai.definitions.InputError", "builtins.ValueError"),
        ("conveyor.intake.documents.UnreadableDocument", "builtins.ValueError"),
        ("conveyor.deploy.settings_file.SettingsFileError", "builtins.ValueError"),
        ("conveyor.intake.operators.SourceUnreachable", "builtins.RuntimeError"),
        ("conveyor.monitoring.notifiers.ChannelNotConfigured", "builtins.RuntimeError"),
        ("conveyor.review.revalidation.RevalidationError", "builtins.RuntimeError"),
        ("conveyor.review.item_escalation.ItemsOverdue", "builtins.RuntimeError"),
        # Review decisions were ledger errors before the tree: `except LedgerError` still catches them.
        ("conveyor.review.errors.DecisionConflict", "conveyor.errors.LedgerError"),
        ("conveyor.review.claims.ClaimHeld", "conveyor.errors.LedgerError"),
    ],
)
def test_the_bases_callers_rely_on_are_kept(exception_classes, name, kept):
    assert kept in exception_classes[name]


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("conveyor.ledger.errors", "LedgerError"),
        ("conveyor.ledger", "LedgerError"),
        ("conveyor.gate.errors", "GateError"),
        ("conveyor.ai.errors", "AIStepError"),
        ("conveyor.review.errors", "ReviewError"),
    ],
)
def test_each_concern_base_is_importable_where_it_was_and_is_the_one_declared_in_conveyor_errors(module, name):
    assert getattr(importlib.import_module(module), name) is getattr(errors, name)


def test_conveyor_error_is_public_and_catches_what_a_dag_author_meets():
    assert "ConveyorError" in conveyor.__all__
    assert conveyor.ConveyorError is errors.ConveyorError
    with pytest.raises(conveyor.ConveyorError, match="no text layer"):
        raise conveyor.UnreadableDocument("invoice.pdf has no text layer")
    assert issubclass(conveyor.InputError, conveyor.ConveyorError)


def test_importing_the_error_tree_imports_no_other_package():
    # The CLI catches ledger errors without importing Airflow: the tree must stay free to import.
    done = subprocess.run(
        [sys.executable, "-c", "import sys; before = set(sys.modules); import conveyor.errors; "
                               "print(sorted({m.split('.')[0] for m in set(sys.modules) - before} "
                               "- set(sys.stdlib_module_names) - {'__future__'}))"],
        capture_output=True, text=True, check=True,
    )
    assert done.stdout.strip() == "['conveyor']"
