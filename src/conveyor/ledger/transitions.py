"""A move of many items, as :meth:`conveyor.ledger.Ledger.transition` makes it: the statuses it
accepts, its chunks, its transactions (one, or two lanes), and what it did not move and why.

Each chunk is moved by :func:`conveyor.ledger.moves.move_chunk`, one guarded statement with its
audit rows; this module decides how many transactions hold those statements.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from conveyor.ledger import moves
from conveyor.ledger.changes import ItemUpdate, TransitionResult
from conveyor.ledger.errors import IllegalTransition
from conveyor.ledger.statuses import as_statuses

if TYPE_CHECKING:
    import psycopg

    from conveyor.workflow import Workflow

#: Items per statement: large enough to be set-based, small enough to keep lock times short.
CHUNK_SIZE = 10_000
#: A move of at least twice this many chunks runs in two lanes (see :func:`move_items`).
_MIN_CHUNKS_PER_LANE = 2

Connect = Callable[[], AbstractContextManager["psycopg.Connection"]]


def move_items(
    connect: Connect,
    flow: Workflow,
    ids: Sequence[str],
    updates: Mapping[str, ItemUpdate] | None,
    *,
    to_status: str,
    actor: str,
    from_status: str | Sequence[str] | None,
    reason: str | None,
    atomic: bool,
    versions: Callable[[str], Mapping[int, Workflow]],
) -> TransitionResult:
    """Move ``ids`` (sorted: one lock order) to ``to_status``; see :meth:`Ledger.transition`.

    :param connect: opens one transaction's connection (:meth:`Ledger.connect`).
    :param versions: every stored version of a workflow's declaration, by name.
    """
    target = str(to_status)
    explicit = from_status is not None
    if from_status is not None:
        froms = list(as_statuses(from_status))
        illegal = [s for s in froms if not flow.allows(s, target)]
        if illegal:
            raise IllegalTransition(flow.name, target, {item: illegal[0] for item in ids})
    else:
        froms = sorted({f for f, t in flow.transitions if t == target})
    blocked = _blocked_versions(flow, froms, target, versions)
    chunks = list(moves.chunks(ids, CHUNK_SIZE))

    def lane(part: Sequence[Sequence[str]]) -> TransitionResult:
        return _move_lane(connect, flow, part, updates, froms, target, actor, reason, explicit, blocked)

    if not atomic and explicit and not blocked and len(chunks) >= 2 * _MIN_CHUNKS_PER_LANE:
        # No item can make this call illegal (the statuses were checked above) and the caller
        # repeats it until done: two lanes keep two server processes moving (a move of 100k
        # items spends ~97% of its time waiting on the server, py-spy).
        lanes = [chunks[: len(chunks) // 2], chunks[len(chunks) // 2 :]]
        with ThreadPoolExecutor(len(lanes), thread_name_prefix="conveyor-move") as pool:
            parts = list(pool.map(lane, lanes))
        result = TransitionResult()
        for part in parts:
            result.moved.extend(part.moved)
            result.not_moved.update(part.not_moved)
        return result
    # One transaction for the whole call (each chunk's statement in a savepoint of its own, for
    # the deadlock retry): an illegal item anywhere leaves every item where it was.
    return lane(chunks)


def _move_lane(
    connect: Connect,
    flow: Workflow,
    chunks: Sequence[Sequence[str]],
    updates: Mapping[str, ItemUpdate] | None,
    froms: Sequence[str],
    target: str,
    actor: str,
    reason: str | None,
    explicit: bool,
    blocked: Sequence[int],
) -> TransitionResult:
    """Move ``chunks`` in one transaction."""
    result = TransitionResult()
    with connect() as conn, conn.transaction():
        for chunk in chunks:
            moved = moves.move_chunk(conn, flow, chunk, updates, froms, target, actor, reason, blocked)
            result.moved.extend(moved)
            missing = [item_id for item_id in chunk if item_id not in moved]
            if missing:
                current = moves.current_statuses(conn, missing)
                bad: dict[str, str] = {}
                if not explicit:
                    bad = {i: s for i, s in current.items() if s is not None and not flow.allows(s, target)}
                if blocked:  # held back by the chain of the version they were received under
                    bad.update({i: s for i, s in current.items() if s is not None and s in froms})
                if bad:
                    raise IllegalTransition(flow.name, target, bad)
                result.not_moved.update(current)
    return result


def _blocked_versions(
    flow: Workflow, froms: Sequence[str], target: str, versions: Callable[[str], Mapping[int, Workflow]]
) -> list[int]:
    """Older versions of the workflow whose chain forbids moving from ``froms`` to ``target``."""
    if flow.version is None or flow.version <= 1:
        return []
    return [
        version
        for version, older in versions(flow.name).items()
        if version != flow.version and any(not older.allows(f, target) for f in froms)
    ]
