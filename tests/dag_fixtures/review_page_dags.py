"""DAGs whose runs the review page's run tab and the health page's run states are shown for."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, task

with DAG("review_page_orders", schedule=None, start_date=pendulum.datetime(2026, 1, 1)) as orders_dag:

    @task
    def carried() -> None:
        """The run only carries items; the test routes them to review itself."""

    carried()


with DAG("review_page_failing", schedule=None, start_date=pendulum.datetime(2026, 1, 1)) as failing_dag:

    @task(retries=0)
    def breaks() -> None:
        raise RuntimeError("the feed was unreadable")

    breaks()
