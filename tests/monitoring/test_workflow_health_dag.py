"""workflow_health end to end: ledger history, dag.test(), a real SMTP server, webhook and OTLP receivers."""

from __future__ import annotations

import atexit
import importlib.util
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conveyor.monitoring.store import MonitoringStore
from tests.monitoring.history import completed_in, seed, stream
from tests.monitoring.scenarios import BASE, OLD_REASON, seed_healthy_week, seed_problem_workflows
from tests.monitoring.servers import http_receiver, otlp_metrics, smtp_server

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "workflow_health.py"
AS_OF = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
RECIPIENTS = ["ops@example.test", "lead@example.test"]


def load_dag(name: str = "workflow_health"):
    spec = importlib.util.spec_from_file_location(name, DAG_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # One attempt per task here: a failure must show at once, not after the retry delays.
    for task in module.dag.tasks:
        task.retries = 0
    return module.dag


def run_health(as_of: datetime, thresholds: dict | None = None):
    conf = {"as_of": as_of.isoformat(), **({"thresholds": thresholds} if thresholds else {})}
    return load_dag().test(logical_date=as_of, run_conf=conf)


@pytest.fixture
def channels(monkeypatch) -> Iterator[tuple]:
    """A real SMTP server and a webhook receiver, configured as Airflow connections and a Variable."""
    with smtp_server() as (mailbox, smtp_port), http_receiver() as (hooks, hook_port):
        monkeypatch.setenv(
            "AIRFLOW_CONN_CONVEYOR_SMTP",
            json.dumps(
                {
                    "conn_type": "smtp",
                    "host": "127.0.0.1",
                    "port": smtp_port,
                    "extra": {
                        "disable_ssl": True,
                        "disable_tls": True,
                        "from_email": "conveyor@example.test",
                        "timeout": 10,
                        "retry_limit": 1,
                    },
                }
            ),
        )
        monkeypatch.setenv("AIRFLOW_VAR_CONVEYOR_ALERT_EMAIL", ", ".join(RECIPIENTS))
        monkeypatch.setenv(
            "AIRFLOW_CONN_CONVEYOR_ALERT_WEBHOOK",
            json.dumps(
                {
                    "conn_type": "http",
                    "host": "127.0.0.1",
                    "port": hook_port,
                    "schema": "http",
                    "extra": {"endpoint": "/hooks/conveyor"},
                }
            ),
        )
        yield mailbox, hooks


def test_each_problem_is_alerted_once_by_mail_and_webhook(airflow_db, ledger, channels):
    mailbox, hooks = channels
    expected = seed_problem_workflows(ledger, AS_OF)

    run = run_health(AS_OF)

    assert run.state == "success"
    wanted = {(wf, rule, "fired") for wf, alerts in expected.items() for rule, _ in alerts}
    assert len(wanted) == 8
    assert sorted(mailbox.alerts()) == sorted(wanted)  # one mail per alert; wf_steady sends none
    assert all(sorted(r) == sorted(RECIPIENTS) for r in mailbox.recipients)
    mails = {tuple(str(m["X-Conveyor-Alert"]).split("/")[:2]): m for m in mailbox.messages}

    zero = mails[("wf_zero", "zero_output")]
    assert str(zero["Subject"]).startswith("[Conveyor critical] wf_zero: completed nothing")
    assert str(zero["From"]) == "conveyor@example.test"
    assert "no item was received" in mailbox.body(zero)
    drop = mailbox.body(mails[("wf_drop", "throughput_drop")])
    assert "down 9" in drop and "median" in drop and "/conveyor/health?workflow=wf_drop" in drop
    assert "SUP-0042" in mailbox.body(mails[("wf_exc", "exception_rate")])
    assert "bottleneck: review" in str(mails[("wf_queue", "cycle_time")]["Subject"])
    assert "bottleneck: model" in str(mails[("wf_model", "cycle_time")]["Subject"])
    old = mailbox.body(mails[("wf_old", "queue_age")])
    assert "wf_old:OLD-1" in old and "&lt;script&gt;" in old and "<script>" not in old

    bodies = hooks.json_bodies()
    assert sorted((b["alert"]["workflow"], b["alert"]["rule"], b["kind"]) for b in bodies) == sorted(wanted)
    assert all(path == "/hooks/conveyor" for path, _, _ in hooks.requests)
    old_hook = next(b for b in bodies if b["alert"]["workflow"] == "wf_old")
    assert OLD_REASON in old_hook["text"] and "Where to look" in old_hook["text"]

    store = MonitoringStore(ledger)
    sent = store.events(state="sent")
    assert len(sent) == 8 and store.events(state="pending") == []
    assert len(store.open_alerts()) == 8
    assert len(store.snapshots("wf_steady", since=AS_OF, until=AS_OF)) == 1

    # An hour later the same conditions hold: nothing is sent again.
    again = run_health(AS_OF + timedelta(hours=1))
    assert again.state == "success"
    assert len(mailbox.messages) == 8 and len(hooks.requests) == 8
    assert len(store.open_alerts()) == 8 and len(store.events(state="sent")) == 8


def test_a_healthy_week_sends_nothing_and_emits_metrics(airflow_db, ledger, channels, monkeypatch):
    mailbox, hooks = channels
    stories = seed_healthy_week(ledger, AS_OF)

    with http_receiver() as (collector, port):
        monkeypatch.setenv("AIRFLOW__METRICS__OTEL_ON", "True")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", f"http://127.0.0.1:{port}/v1/metrics")
        monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "600000")
        import airflow.sdk.serde  # noqa: F401 - it initialises stats on import; do that before we do
        from airflow.sdk._shared.observability.metrics import otel_logger
        from airflow.sdk._shared.observability.metrics.base_stats_logger import NoStatsLogger
        from airflow.sdk.observability import stats
        from airflow.sdk.observability.metrics.stats_utils import get_stats_factory
        from opentelemetry import metrics as otel

        # What the task runner does at the start of every task process: metrics from the [metrics] config.
        stats.initialize(factory=get_stats_factory(), export_legacy_names=False)
        try:
            run = run_health(AS_OF)
            provider = otel.get_meter_provider()
            provider.force_flush()
        finally:
            stats.initialize(factory=NoStatsLogger, export_legacy_names=False)
            provider = otel.get_meter_provider()
            if hasattr(provider, "shutdown"):
                provider.shutdown()
            # Airflow flushes metrics at exit; this provider is shut down and its collector gone by then.
            atexit.unregister(otel_logger.flush_otel_metrics)
        deadline = time.monotonic() + 10
        while not collector.requests and time.monotonic() < deadline:
            time.sleep(0.1)
        received = otlp_metrics(collector)

    assert run.state == "success"
    assert mailbox.messages == [] and hooks.requests == []
    store = MonitoringStore(ledger)
    assert store.events() == [] and store.open_alerts() == []

    # Each export (flush, then shutdown) repeats a gauge's last value: every point must carry it.
    def points(name: str) -> set[tuple[tuple[tuple[str, str], ...], float]]:
        return {(tuple(sorted(attrs.items())), value) for attrs, value in received[name]}

    expected = completed_in(stories["supplier_exceptions"], "published", AS_OF - timedelta(hours=24), AS_OF)
    assert points("airflow.conveyor.supplier_exceptions.throughput") == {
        ((("workflow", "supplier_exceptions"),), expected)
    }
    invoices = completed_in(stories["invoice_processing"], "archived", AS_OF - timedelta(hours=24), AS_OF)
    assert {v for _, v in points("airflow.conveyor.invoice_processing.throughput")} == {invoices}
    assert all(0 <= v < 0.15 for _, v in points("airflow.conveyor.invoice_processing.exception_rate"))
    assert "airflow.conveyor.supplier_exceptions.stage.model.p95_s" in received
    assert max(v for _, v in points("airflow.conveyor.health.measure")) >= 1  # the timing, as a histogram


def test_alerts_with_no_channel_configured_fail_the_run(airflow_db, ledger, monkeypatch):
    for name in (
        "AIRFLOW_CONN_CONVEYOR_SMTP",
        "AIRFLOW_CONN_CONVEYOR_ALERT_WEBHOOK",
        "AIRFLOW_VAR_CONVEYOR_ALERT_EMAIL",
    ):
        monkeypatch.delenv(name, raising=False)
    # An ordinary workflow, run with a bound tightened for this run only: the override alone raises an alert.
    seed(ledger, "wf_steady", stream("wf_steady", as_of=AS_OF, profile=BASE.but(per_day=60)))

    run = run_health(
        AS_OF, thresholds={"wf_steady": {"exception_rate_bound": 0.001, "exception_min_items": 5}}
    )

    assert run.state == "failed"
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"measure": "success", "evaluate": "success", "notify": "failed"}
    store = MonitoringStore(ledger)
    [pending] = store.events(state="pending")
    assert (pending.alert.workflow, pending.alert.rule) == ("wf_steady", "exception_rate")
    assert "the declared bound is 0%" in pending.alert.change  # 0.1%, printed to whole percents
    assert store.events(state="sent") == []
    # The other thresholds stayed as declared in the DAG.
    assert store.snapshots("wf_steady", since=AS_OF, until=AS_OF)[0].window_hours == 24


def test_the_dag_file_parses_fast_and_declares_recovery():
    import airflow.sdk  # what every DAG file pays; warm Airflow's lazily imported task decorator too

    airflow.sdk.task  # noqa: B018
    load_dag("workflow_health_warmup")
    started = time.perf_counter()
    dag = load_dag("workflow_health_timed")
    assert time.perf_counter() - started <= 0.5
    assert dag.schedule == "@hourly" and dag.max_active_runs == 1
    for task in dag.tasks:
        lines = [line for line in (task.doc_md or "").splitlines() if line.startswith("Recovery: ")]
        assert len(lines) == 1, task.task_id
        assert lines[0].split(" — ")[0].removeprefix("Recovery: ") in {
            "retry",
            "circuit breaker",
            "alternative path",
            "graceful degradation",
            "manual intervention",
        }
