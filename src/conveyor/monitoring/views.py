"""The health page's entries in the Airflow UI (``external_views``); cheap to import in every process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: Where the health page lives, relative to the API server's base URL (the app's mount + the router path).
HEALTH_PAGE_PATH = "/conveyor/health"


def external_views(base_path: Callable[[str], str] = lambda path: path) -> list[dict[str, Any]]:
    """The health page in the navigation, and on each DAG (pre-selecting the workflow of that name).

    :param base_path: maps a path to the path under Airflow's ``[api] base_url`` (Airflow behind a sub-path).
    """
    page = base_path(HEALTH_PAGE_PATH)
    return [
        {
            "name": "Workflow health",
            "href": page,
            "destination": "nav",
            "category": "browse",
            "url_route": "conveyor-health",
        },
        {
            "name": "Workflow health",
            "href": page + "?workflow={DAG_ID}",
            "destination": "dag",
            "url_route": "conveyor-health-dag",
        },
    ]
