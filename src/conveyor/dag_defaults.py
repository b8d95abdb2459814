"""Task defaults for a guarded workflow: failure alerts to a person, retries with backoff.

Cheap to import (DAG files import it at parse time): no Airflow import beyond ``timedelta``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from conveyor import config
from conveyor.monitoring.task_alerts import alert_on_failure


def default_args(retries: int = 2, **overrides: Any) -> dict[str, Any]:
    """``default_args`` for a DAG: a person hears about any failed step (e-mail on ``conveyor_smtp``
    to the Variable ``conveyor_alert_email``, and/or the webhook ``conveyor_alert_webhook``);
    transient failures retry with exponential backoff, the first after ``[conveyor] retry_delay_seconds``.

    :param retries: Airflow retries per task.
    :param overrides: any other default argument.
    """
    return {
        "owner": "conveyor",
        "retries": retries,
        "retry_delay": timedelta(seconds=config.get_int("retry_delay_seconds")),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=10),
        "on_failure_callback": alert_on_failure,
        **overrides,
    }
