"""Who made a change: every audit row names a task attempt or a person."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def task_actor(context: Mapping[str, Any]) -> str:
    """``<dag_id>.<task_id>#<try_number>`` for the task instance in an Airflow context."""
    ti = context["ti"]
    return f"{ti.dag_id}.{ti.task_id}#{ti.try_number}"


def reviewer_actor(name: str) -> str:
    """``reviewer:<name>`` for a person's decision; the name must not be blank."""
    cleaned = name.strip()
    if not cleaned:
        raise ValueError("a reviewer name is required")
    return f"reviewer:{cleaned}"
