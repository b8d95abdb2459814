"""How the suite shares out over pytest-xdist workers (``./scripts/test`` runs it with ``-n``).

A test module is one unit of work, so its module fixtures (a finished run on the native stack, a
review page with its data) are built once, on one worker. Modules that share an expensive session
fixture are one unit together (:data:`UNITS`): the stack modules, so one worker starts one stack for
them. The units that take longest go first (:data:`FIRST`), so that the last one to start is a short
one; the rest keep pytest-randomly's shuffled order.

pytest-xdist's own ``--dist loadgroup`` would do the grouping, but with pytest 9.2 it sets a node
attribute pytest no longer reads, and the groups are ignored (xdist 3.8); ``loadscope`` with our
own idea of a scope does the same job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

#: Test modules that run as one unit of work (module path -> unit name). Each unit that uses the
#: ``stack`` fixture starts a native stack of its own on its worker: three stacks run side by side.
UNITS: dict[str, str] = {
    "tests/deploy/test_stack.py": "stack: smoke and intake",
    "tests/deploy/test_intake_names.py": "stack: smoke and intake",
}

#: Units started before all others, longest first (module path or unit name); measured with
#: ``./scripts/test --durations=0``.
FIRST: tuple[str, ...] = (
    "tests/deploy/test_deployment.py",
    "tests/deploy/test_faults.py",
    "stack: smoke and intake",
    "tests/packaging/test_wheel.py",
    "tests/quickstart/test_ui.py",
    "tests/dags/test_supplier_exceptions.py",
    "tests/review/test_review_workday.py",
    "tests/deploy/test_init_script.py",
    "tests/monitoring/test_plans.py",
    "tests/dags/test_integrity.py",
    "tests/dags/test_invoice_processing.py",
)


def unit_of(nodeid: str) -> str:
    """The unit of work of a test: its module, or the unit its module belongs to."""
    module = nodeid.split("::", 1)[0]
    return UNITS.get(module, module)


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
