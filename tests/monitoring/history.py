"""Writing realistic ledger history with explicit timestamps (test set-up for the monitoring tests).

The ledger stamps every write with ``now()``, so days of history cannot be produced through it.
:func:`seed` writes items and their audit rows directly, after checking every step against the
workflow's transition table, so the history is one the ledger itself could have written.
:func:`stream` generates a workflow's traffic day by day from a :class:`Profile`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from conveyor.ledger import Ledger
from conveyor.ledger.hashing import canonical_json, input_hash
from conveyor.ledger.statuses import Status
from conveyor.monitoring.stages import Stage, stage_of
from tests.support.workflows import declaration

DAY = timedelta(days=1)


@dataclass
class Story:
    """One item's path: ``steps`` are (status, when), starting with ``received``."""

    business_key: str
    run_id: str
    payload: dict
    steps: list[tuple[str, datetime]]
    reason: str | None = None


def seed(ledger: Ledger, workflow: str, stories: Iterable[Story], *, actor: str = "history-seed") -> int:
    """Write the items and every transition of ``stories``; returns how many items were written.

    :raises ValueError: a story starts elsewhere than ``received``, goes back in time, or makes a
        transition the workflow does not allow.
    """
    flow = ledger.declare(declaration(workflow), actor=actor)
    items, transitions = [], []
    for story in stories:
        if not story.steps or story.steps[0][0] != Status.RECEIVED:
            raise ValueError(f"{story.business_key}: a story starts at 'received'")
        for (before, at_before), (after, at_after) in zip(story.steps, story.steps[1:], strict=False):
            if at_after < at_before:
                raise ValueError(
                    f"{story.business_key}: {after} at {at_after} is before {before} at {at_before}"
                )
            if not flow.allows(before, after):
                raise ValueError(f"{story.business_key}: {workflow} does not allow {before} -> {after}")
        item_id = f"{workflow}:{story.business_key}"
        stage_times: dict[str, str] = {}
        for status, at in story.steps:
            stage_times.setdefault(status, at.isoformat())
        status, last_at = story.steps[-1]
        items.append(
            (
                item_id,
                workflow,
                story.business_key,
                story.run_id,
                status,
                canonical_json(story.payload),
                input_hash(story.payload),
                json.dumps(stage_times),
                story.reason,
                story.steps[0][1],
                last_at,
            )
        )
        previous = None
        for step, at in story.steps:
            transitions.append((item_id, story.run_id, workflow, previous, step, at, actor, None))
            previous = step
    with ledger.connect() as conn, conn.cursor() as cur:
        with cur.copy(
            "COPY conveyor.items (item_id, workflow, business_key, run_id, status, payload, input_hash,"
            " stage_times, reason, created_at, updated_at) FROM STDIN"
        ) as copy:
            for row in items:
                copy.write_row(row)
        with cur.copy(
            "COPY conveyor.transitions (item_id, run_id, workflow, from_status, to_status, at, actor, reason)"
            " FROM STDIN"
        ) as copy:
            for row in transitions:
                copy.write_row(row)
    return len(items)


@dataclass(frozen=True)
class Profile:
    """How a workflow behaves for items received at some time.

    :param per_day: items received per day.
    :param exception_share: share routed to a person (half at the gate, half after the model).
    :param sources: source id -> weight (who sends the items).
    :param source_exception_share: source id -> its own exception share (overrides the default).
    :param waits: stage -> typical time an item spends there (each item varies by +-20%).
    """

    per_day: int = 200
    exception_share: float = 0.05
    sources: Mapping[str, float] = field(default_factory=lambda: {f"SUP-{i:04d}": 1.0 for i in range(1, 11)})
    source_exception_share: Mapping[str, float] = field(default_factory=dict)
    waits: Mapping[str, timedelta] = field(
        default_factory=lambda: {
            Stage.GATE: timedelta(minutes=1),
            Stage.MODEL: timedelta(minutes=2),
            Stage.REVIEW: timedelta(minutes=10),
            Stage.APPROVAL: timedelta(minutes=20),
            Stage.PUBLISH: timedelta(minutes=5),
        }
    )

    def but(self, *, waits: Mapping[str, timedelta] | None = None, **changes: object) -> Profile:
        """This profile with some fields changed; ``waits`` changes only the stages it names."""
        return replace(self, waits={**self.waits, **(waits or {})}, **changes)  # type: ignore[arg-type]


def path(
    workflow: str, received_at: datetime, profile: Profile, detour: str | None, rng: random.Random
) -> list[tuple[str, datetime]]:
    """An item's steps through ``workflow``'s chain; ``detour`` is None, ``"gate"`` or ``"model"``."""
    flow = declaration(workflow)

    def wait(stage: Stage) -> timedelta:
        return profile.waits[stage] * rng.uniform(0.8, 1.2)

    steps: list[tuple[str, datetime]] = [(Status.RECEIVED, received_at)]
    t = received_at
    detoured = False
    for status in flow.chain[:-1]:
        stage = stage_of(flow, status)
        t += wait(stage)  # type: ignore[arg-type]
        following = flow.next_after(status)
        if not detoured and detour == "gate" and status == flow.gate_input:
            steps.append((Status.QUARANTINED, t))
            t += wait(Stage.REVIEW)
            detoured = True
        elif not detoured and detour == "model" and stage == Stage.MODEL:
            steps.append((Status.PENDING_REVIEW, t))
            t += wait(Stage.REVIEW)
            detoured = True
        steps.append((following, t))
    return steps


def stream(
    workflow: str,
    *,
    as_of: datetime,
    days: int = 8,
    profile: Profile | Callable[[datetime], Profile] = Profile(),
    seed_value: int = 7,
    key_prefix: str = "IT",
) -> list[Story]:
    """Items received over ``days`` days before ``as_of``, one run per day, cut at ``as_of``.

    Steps after ``as_of`` are dropped, so items received late are still in flight, as they would be.
    :param profile: a fixed profile, or one chosen by each item's receipt time.
    """
    rng = random.Random(f"{workflow}-{seed_value}")
    pick = profile if callable(profile) else (lambda _when: profile)
    stories: list[Story] = []
    for day in range(days, 0, -1):
        start = as_of - day * DAY
        run_id = f"scheduled__{start:%Y-%m-%dT%H}"
        expected = pick(start).per_day
        count = round(expected * rng.uniform(0.95, 1.05))
        for n in range(count):
            received_at = start + DAY * (n + rng.random()) / count
            current = pick(received_at)
            if current.per_day == 0 or rng.random() > current.per_day / max(expected, 1):
                continue  # this profile receives fewer items at this time of the day
            names, weights = zip(*current.sources.items(), strict=True)
            source = rng.choices(names, weights)[0]
            share = current.source_exception_share.get(source, current.exception_share)
            detour = None
            if rng.random() < share:
                detour = "gate" if rng.random() < 0.5 else "model"
            steps = [s for s in path(workflow, received_at, current, detour, rng) if s[1] < as_of]
            key = f"{key_prefix}-{received_at:%m%d%H%M%S}-{n:04d}"
            stories.append(Story(key, run_id, {"supplier_id": source, "vendor_id": source, "n": n}, steps))
    return stories


def seed_stream(ledger: Ledger, workflow: str, **kwargs: object) -> list[Story]:
    """:func:`stream` then :func:`seed`; returns the stories written."""
    stories = stream(workflow, **kwargs)  # type: ignore[arg-type]
    seed(ledger, workflow, stories)
    return stories


def completed_in(stories: Sequence[Story], done: str, start: datetime, end: datetime) -> int:
    """How many stories reached ``done`` in ``[start, end)`` (the expected throughput)."""
    return sum(1 for s in stories for status, at in s.steps if status == done and start <= at < end)
