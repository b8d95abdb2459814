"""How the suite shares out over pytest-xdist workers (``./scripts/test`` runs it with ``-n``).

A test module is one unit of work, so its module fixtures (a finished run on the native stack, a
review page with its data) are built once, on one worker. Modules that share an expensive session
fixture are one unit together: the stack modules (:data:`UNITS`), so one worker starts one stack for
them, and the API server's, in two units (:data:`API_SERVER_UNITS`). The units that take longest go
first (:data:`FIRST`), so that the last one to start is a short one; the rest keep pytest-randomly's
shuffled order.

pytest-xdist's own ``--dist loadgroup`` would do the grouping, but with pytest 9.2 it sets a node
attribute pytest no longer reads, and the groups are ignored (xdist 3.8); ``loadscope`` with our
own idea of a scope does the same job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

#: Test modules that run as one unit of work (module path -> unit name). Each unit that uses the
#: ``stack`` fixture starts a native stack of its own on its worker: two stacks, never more (a third
#: cost a minute of CPU to start and kept a 2-core machine at a load of 10; an API call then waited
#: over 30 s). The intake tests go with the faults, not with test_deployment: they unpause the
#: bundled DAGs, and test_deployment's first run is the scheduled run a *fresh* deployment makes.
#: Seconds measured with ``--durations=0`` on a quiet machine, 2026-12-07.
UNITS: dict[str, str] = {
    **dict.fromkeys((
        "tests/deploy/test_faults.py",  # 355 s with the stack's start
        "tests/deploy/test_intake_names.py",  # 82 s
    ), "stack: faults and intake names"),
    **dict.fromkeys((
        "tests/deploy/test_deployment.py",  # 235 s with the stack's start
        "tests/deploy/test_stack.py",  # 61 s
    ), "stack: a fresh deployment and the harness"),
}

#: The modules that use the session's API server (the ``api_server`` fixture), in two units: every
#: worker that runs one of them starts an API server of its own (tens of seconds of CPU on a 2-core
#: machine), so they share out over two workers, not five. Balanced by their measured seconds
#: (``--durations=0``, 2026-12-04); tests/test_scheduling.py fails when a module is missing here.
API_SERVER_UNITS: dict[str, str] = {
    **dict.fromkeys((
        "tests/dags/test_supplier_exceptions.py",  # 227 s
        "tests/review/test_review_workday.py",  # 107 s
        "tests/dags/test_guardrail_measured.py",  # 47 s
        "tests/review/test_review_in_a_real_run.py",  # 29 s
        "tests/review/test_web_api.py",  # 8 s
    ), "API server: suppliers and the review day"),
    **dict.fromkeys((
        "tests/dags/test_invoice_processing.py",  # 119 s
        "tests/review/test_ways_on_in_real_runs.py",  # 56 s
        "tests/review/test_narrow_run_tab.py",  # 55 s
        "tests/review/test_decision_contract.py",  # 50 s
        "tests/review/test_review_page_keys.py",  # 41 s
        "tests/review/test_web_page.py",  # 29 s
        "tests/dags/test_inspection_notes.py",  # 28 s
        "tests/review/test_signoff_preview.py",  # 27 s
        "tests/review/test_wake_up.py",  # 16 s
        "tests/review/test_hostile_input.py",  # 6 s
    ), "API server: invoices and the review page"),
}

#: Units started before all others, longest first (module path or unit name); measured with
#: ``./scripts/test --durations=0``.
FIRST: tuple[str, ...] = (
    "stack: faults and intake names",
    "API server: invoices and the review page",
    "API server: suppliers and the review day",
    "stack: a fresh deployment and the harness",
    "tests/packaging/test_wheel.py",
    "tests/quickstart/test_ui.py",
    "tests/deploy/test_init_script.py",
    "tests/dags/test_integrity.py",
    "tests/monitoring/test_plans.py",
)


def unit_of(nodeid: str) -> str:
    """The unit of work of a test: its module, or the unit its module belongs to."""
    module = nodeid.split("::", 1)[0]
    return UNITS.get(module) or API_SERVER_UNITS.get(module, module)


def rank(nodeid: str) -> int:
    """Where a test's unit starts: the index in :data:`FIRST`, or after all of them."""
    unit = unit_of(nodeid)
    return FIRST.index(unit) if unit in FIRST else len(FIRST)


def longest_first(items: list[pytest.Item]) -> None:
    """Put the units of :data:`FIRST` first, in its order; a stable sort keeps the rest as they were."""
    items.sort(key=lambda item: rank(item.nodeid))


def make_scheduler(config: pytest.Config, log: object) -> object:
    """A ``loadscope`` scheduler whose scope is :func:`unit_of`."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    # loadscope's default reorders the units by their number of tests, which puts many quick tests
    # before a few long ones: keep the collection's order (longest_first's).
    config.option.loadscopereorder = False
    return UnitScheduling(config, log)  # type: ignore[arg-type]  # xdist's Producer, untyped here
