"""While a deployment rolls out, a worker still on the previous release keeps working on an
upgraded ledger: it receives, claims and moves items through the ``conveyor.items`` view (0018),
and lists them (0019 took away the index of its order: a sort, but the same answer).

The previous release is the code itself, unpacked from git (``git archive``) and run in a process
of its own beside this tree's ledger.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conveyor.ledger import Ledger
from tests.support.previous_release import RELEASES, unpack_src
from tests.support.workflows import SUPPLIER

_OLD_WORKER = textwrap.dedent(
    """
    import json, sys
    import conveyor
    from conveyor.ledger import Ledger, NewItem
    from conveyor.ledger.changes import ItemUpdate
    from conveyor.ledger.leases import Holder

    ledger = Ledger(sys.argv[1])
    wf = "supplier_exceptions"
    ids = [f"{wf}:OLD-{n}" for n in range(40)]
    received = ledger.receive(wf, "old-run", [NewItem(f"OLD-{n}", {"n": n}) for n in range(40)], actor="old#1")
    claim = ledger.claim_chunk(workflow=wf, run_id="old-run", status="received", step="gate",
                               holder=Holder("old-worker", 1), limit=10, lease_seconds=60)
    validated = ledger.transition(wf, ids, to_status="validated", from_status="received", actor="old#1")
    # Any-from (locks rows through the view) with the body's data (the AI step's result).
    drafted = ledger.transition(wf, {i: ItemUpdate(ai_result={"draft": i}, confidence=0.7) for i in ids},
                                to_status="ai_processed", actor="old#1")
    listed = ledger.items(workflow=wf, limit=5)
    print(json.dumps({"code": conveyor.__file__, "received": len(received.inserted), "claimed": len(claim.item_ids),
                      "validated": len(validated.moved), "drafted": len(drafted.moved), "listed": len(listed)}))
    """
)


@pytest.mark.parametrize("release", RELEASES.values(), ids=RELEASES.keys())
def test_a_worker_of_the_previous_release_works_on_the_upgraded_ledger(fresh_db, tmp_path, release):
    ledger = Ledger(fresh_db)
    ledger.upgrade()
    ledger.declare(SUPPLIER)
    old_src = unpack_src(tmp_path, release)
    env = dict(os.environ, PYTHONPATH=str(old_src))
    done = subprocess.run([sys.executable, "-c", _OLD_WORKER, fresh_db], env=env, capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report.pop("code") == str(old_src / "conveyor" / "__init__.py")  # the old code ran
    assert report == {"received": 40, "claimed": 10, "validated": 40, "drafted": 40, "listed": 5}

    # This release reads what the old one wrote, and moves it on.
    wf = SUPPLIER.name
    assert ledger.count_by_status(workflow=wf, run_id="old-run") == {"ai_processed": 40}
    item = ledger.get(f"{wf}:OLD-7")
    assert item.ai_result == {"draft": f"{wf}:OLD-7"} and item.confidence == 0.7 and item.payload == {"n": 7}
    assert [r.to_status for r in ledger.history(f"{wf}:OLD-7")] == ["received", "validated", "ai_processed"]
    moved = ledger.transition(wf, [f"{wf}:OLD-{n}" for n in range(40)], to_status="approved",
                              from_status="ai_processed", actor="new#1")
    assert len(moved.moved) == 40
