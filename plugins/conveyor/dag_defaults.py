"""What every bundled DAG shares: failure alerts to a person, retries with backoff, paths.

Cheap to import (DAG files import it at parse time): no Airflow import beyond ``timedelta``.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from conveyor.include import include_dir
from conveyor.monitoring.task_alerts import alert_on_failure

INCLUDE = include_dir()

#: seconds between two looks at the review queue (short in demos, a minute in production)
REVIEW_POKE_SECONDS = int(os.environ.get("CONVEYOR_REVIEW_POKE_SECONDS", "60"))


def default_args(retries: int = 2) -> dict[str, Any]:
    """Task defaults: a person hears about any failed step; transient failures retry with backoff."""
    return {
        "owner": "conveyor",
        "retries": retries,
        "retry_delay": timedelta(minutes=1),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=10),
        "on_failure_callback": alert_on_failure,
    }
