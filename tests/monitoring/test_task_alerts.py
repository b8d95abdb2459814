"""The failure alert's "where to look" points at what holds the answer."""

from __future__ import annotations

from types import SimpleNamespace

from conveyor.monitoring.task_alerts import failure_message


def _context(error: BaseException) -> dict:
    ti = SimpleNamespace(dag_id="supplier_exceptions", task_id="validate", try_number=1, log_url=None)
    return {"ti": ti, "run_id": "manual__1", "exception": error}


def test_a_rejected_batch_points_at_conveyor_batches():
    from airflow.sdk.exceptions import AirflowFailException

    from conveyor.gate.errors import BatchRejected

    try:
        try:
            raise BatchRejected("missing_columns", "column 'supplier_id' missing")
        except BatchRejected as exc:
            raise AirflowFailException(f"validation gate rejected the batch: {exc.reason}") from exc
    except AirflowFailException as failure:
        _, text = failure_message(_context(failure))

    assert "conveyor batches --workflow supplier_exceptions --run 'manual__1'" in text
    assert "conveyor items" not in text


def test_any_other_failure_points_at_the_items():
    _, text = failure_message(_context(RuntimeError("the model timed out")))

    assert "conveyor items --workflow supplier_exceptions --run 'manual__1'" in text
    assert "conveyor batches" not in text
