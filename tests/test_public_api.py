"""The public API: every name a DAG author needs is in ``conveyor.__all__``, cheap to import, and the
bundled workflows use nothing else; the library itself names none of them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import conveyor

REPO = Path(__file__).resolve().parents[1]
BUNDLED = ("supplier_exceptions", "invoice_processing", "inspection_notes")


def test_every_public_name_resolves():
    for name in conveyor.__all__:
        assert getattr(conveyor, name) is not None, name
    with pytest.raises(AttributeError):
        conveyor.NoSuchThing  # noqa: B018


def test_importing_conveyor_costs_nothing():
    done = subprocess.run(
        [sys.executable, "-c", "import sys, conveyor; print(sorted(m for m in sys.modules if m.split('.')[0] in "
                               "('airflow', 'pandas', 'great_expectations', 'psycopg', 'sklearn')))"],
        capture_output=True, text=True, check=True,
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("path", sorted((REPO / "dags").rglob("*.py")), ids=lambda p: p.name)
def test_the_bundled_workflows_import_only_the_public_api(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "conveyor":
            assert node.module == "conveyor", f"{path.name} imports {node.module}"
            assert {alias.name for alias in node.names} <= set(conveyor.__all__), path.name
        if isinstance(node, ast.Import):
            assert not [a.name for a in node.names if a.name.split(".")[0] == "conveyor"], path.name


def test_the_library_names_no_bundled_workflow():
    source = REPO / "src" / "conveyor"
    named = [
        f"{path.relative_to(source)}:{n}"
        for path in source.rglob("*")
        if path.is_file() and path.suffix in {".py", ".js", ".html", ".css"} and "quickstart" not in path.parts
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if any(name in line for name in BUNDLED)
    ]
    assert named == [], "the library knows no demo: " + ", ".join(named)


def test_importing_a_workflows_code_twice_in_one_process_declares_nothing_twice():
    import importlib

    from conveyor.ai.definitions import register_ai_task

    module = importlib.import_module("conveyor_examples.inspection_notes")
    first_task, first_flow = module.SUMMARIZE, module.INSPECTIONS
    importlib.reload(module)  # as a DAG processor re-parsing the file does: new objects, same declarations
    assert module.SUMMARIZE is not first_task and module.SUMMARIZE == first_task
    assert module.INSPECTIONS is not first_flow and module.INSPECTIONS == first_flow
    assert register_ai_task(first_task) is first_task
    assert register_ai_task(module.SUMMARIZE) is module.SUMMARIZE  # the same declaration: a no-op
    other = type(first_task)(name=first_task.name, output_schema=first_task.output_schema,
                             render=first_task.render, instructions="something else")
    with pytest.raises(ValueError, match="already registered"):
        register_ai_task(other)


def test_conveyor_error_is_the_public_root_of_the_public_errors():
    assert "ConveyorError" in conveyor.__all__
    for name in ("InputError", "UnreadableDocument"):
        assert issubclass(getattr(conveyor, name), conveyor.ConveyorError), name


def test_check_is_the_public_contract_of_rule_checks_and_its_example_runs():
    import textwrap

    from conveyor.ai.checks import run_checks

    assert "Check" in conveyor.__all__
    assert all(isinstance(check, conveyor.Check) for check in (conveyor.Required(("a",)), conveyor.NotVague("a")))
    doc = conveyor.Check.__doc__ or ""
    example = textwrap.dedent(doc.split("Example, a draft must name the supplier it was written for::", 1)[1])
    # The AITask line's "..." stands for the task's other arguments: keep its checks only.
    example = example.replace("CLASSIFY = AITask(..., checks=(", "CHECKS = (")
    example = example.replace("NamesSupplier()))", "NamesSupplier())")
    scope: dict = {}
    exec(compile(example, "Check.__doc__", "exec"), scope)  # the documented example, as written

    failed = run_checks(scope["CHECKS"], {"category": "late", "draft": "We will chase it."}, {"supplier_name": "Acme"})
    assert failed == [("names_supplier", "draft does not name the supplier 'Acme'")]
    assert run_checks(scope["CHECKS"], {"category": "late", "draft": "Acme is late."}, {"supplier_name": "Acme"}) == []
