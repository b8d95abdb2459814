"""No import cycles in the package: every module can be read, tested and moved on its own.

The graph counts imports inside functions too (see ``tests/support/source_graph.import_graph``).
``KNOWN`` lists the cycles not yet taken apart (issues 30 and 31); it may only shrink: a cycle
that is gone must leave the list, a new one fails the suite.
"""

from __future__ import annotations

from tests.support.source_graph import cycles, import_graph

KNOWN: set[tuple[str, ...]] = {
    ("conveyor.review.ai_answers", "conveyor.review.blockers", "conveyor.review.coercion", "conveyor.review.errors"),
    ("conveyor.review.bulk", "conveyor.review.decisions", "conveyor.review.ways_on"),
}


def test_no_new_import_cycle() -> None:
    found = set(cycles(import_graph()))
    new = found - KNOWN
    assert not new, "import cycle(s) in src/: " + "; ".join(" <-> ".join(c) for c in sorted(new))


def test_known_cycles_are_still_there() -> None:
    gone = KNOWN - set(cycles(import_graph()))
    assert not gone, "taken apart, so take them off KNOWN: " + "; ".join(" <-> ".join(c) for c in sorted(gone))


def test_the_walk_finds_a_cycle() -> None:
    # The check itself: a two-module cycle, and one through a third module, are found; a chain is not.
    assert cycles({"a": frozenset({"b"}), "b": frozenset({"a"}), "c": frozenset({"a"})}) == [("a", "b")]
    assert cycles({"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"})}) == [("a", "b", "c")]
    assert cycles({"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset()}) == []


#: What review still imports of the gate and the AI step (issue 31 takes these apart too; the list
#: may only shrink). A corrected AI answer is checked in the API server with the task's own rule
#: checks, rebuilt from the declaration the ledger stored.
REVIEW_REACHES: dict[str, set[str]] = {
    "conveyor.review.ai_answers": {"conveyor.ai.checks"},
}


def test_review_knows_the_gate_and_the_ai_step_only_through_its_own_interfaces() -> None:
    # Review sits beside the gate and the AI step: revalidating a correction calls a gate through
    # review.revalidation.ValidatesCorrections, and catching up runs any resumable ledger step.
    graph = import_graph()
    reached = {
        module: {t for t in targets if t.split(".")[:2] in (["conveyor", "gate"], ["conveyor", "ai"])}
        for module, targets in graph.items()
        if module.startswith("conveyor.review")
    }
    reached = {module: targets for module, targets in reached.items() if targets}
    assert reached == REVIEW_REACHES
