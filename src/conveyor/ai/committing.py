"""A judged chunk into the ledger: its moves, the accuracy tallies of what moved, its leases freed.

Each move is guarded by ``from_status``, so a commit repeated after a lost acknowledgement (a
ledger restart mid-commit) moves nothing the second time: its items count as raced, and nothing
is counted twice or paid for again.
"""

from __future__ import annotations

import logging

from conveyor.ai.judging import ChunkOutcome
from conveyor.ai.sharding import ShardClaims
from conveyor.ai.step_config import StepConfig
from conveyor.ledger.ai_labels import StepTally, bucket
from conveyor.ledger.faults import patiently
from conveyor.ledger.statuses import Status
from conveyor.ledger.store import Ledger

log = logging.getLogger(__name__)


class ChunkCommitter:
    """Commits one run's chunks, and counts what it moved.

    :param ledger: the item ledger.
    :param config: the step's configuration.
    :param claims: the shard's leases (None: the run is not sharded).
    """

    def __init__(self, ledger: Ledger, config: StepConfig, claims: ShardClaims | None) -> None:
        assert config.from_status is not None and config.to_status is not None  # see StepConfig.__post_init__
        self.ledger = ledger
        self.config = config
        self.claims = claims
        #: items this run moved, and items someone else had moved first
        self.moved = 0
        self.raced = 0

    def commit_patiently(self, outcome: ChunkOutcome, chunk: int | str) -> None:
        """Commit, waiting out a ledger restart (see the module's docstring)."""
        patiently(lambda: self.commit(outcome), what=f"committing chunk {chunk}")

    def commit(self, outcome: ChunkOutcome) -> None:
        c = self.config
        assert c.from_status is not None and c.to_status is not None
        moved: set[str] = set()
        for updates, target in ((outcome.passed, c.to_status), (outcome.review, Status.PENDING_REVIEW)):
            if not updates:
                continue
            result = self.ledger.transition(
                c.workflow, updates, to_status=target, from_status=c.from_status, actor=c.actor
            )
            moved.update(result.moved)
            self.moved += len(result.moved)
            if result.not_moved:
                # Another worker moved them first (or this commit's own first try did, its
                # acknowledgement lost in a ledger restart): their result stands.
                self.raced += len(result.not_moved)
                log.warning(
                    "%d item(s) were moved by someone else meanwhile: %s",
                    len(result.not_moved),
                    list(result.not_moved)[:5],
                )
        if moved:
            # Only what this commit moved: a commit repeated after a lost acknowledgement moves
            # nothing and counts nothing twice.
            self.ledger.record_ai_tallies([self.tally_of(outcome, moved)])
        if self.claims is not None:  # moved (or raced): no sibling would claim them, the lease is moot
            self.claims.release([*outcome.passed, *outcome.review])

    def tally_of(self, outcome: ChunkOutcome, moved: set[str]) -> StepTally:
        """What the moved items of a chunk count for the accuracy estimate."""
        c = self.config
        tally = StepTally(
            workflow=c.workflow,
            step=c.step or c.task.name,  # always set by StepConfig.__post_init__
            run_id=c.run_id,
            min_confidence=c.settings.min_confidence,
            spot_check=c.settings.spot_check,
            max_error_rate=c.settings.max_error_rate,
            seed=c.seed,
            passed=sum(1 for i in outcome.passed if i in moved),
            spot_checked=sum(1 for i in outcome.spot if i in moved),
            exceptions=sum(1 for i in outcome.review if i in moved and i not in outcome.spot),
        )
        for confidences, histogram in (
            (outcome.passing_confidence, tally.passed_by_confidence),
            (outcome.low_only_confidence, tally.low_only_by_confidence),
        ):
            for item_id, confidence in confidences.items():
                if item_id in moved:
                    histogram[bucket(confidence)] += 1
        return tally
