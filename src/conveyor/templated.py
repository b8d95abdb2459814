"""Reading templated operator arguments: what a rendered template means when it names nothing."""

from __future__ import annotations

import copy
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator, Context

_Operator = TypeVar("_Operator", bound="BaseOperator")

#: What a Jinja template renders when its value is missing (``{{ params.x }}`` of a null param...).
BLANKS = frozenset({"", "None", "none", "null"})


def or_none(value: Any) -> Any:
    """``value``, or None when it is None or a rendered blank (``""``, ``"None"``, ``"null"``)."""
    if value is None or (isinstance(value, str) and value.strip() in BLANKS):
        return None
    return value


def rendered_copy(task: _Operator, context: Context, *, skip: Collection[str] = ()) -> _Operator:
    """A copy of another task of the DAG with its templated fields rendered for this run, as its
    own task instance renders them (so a step can run a sibling's work with the sibling's settings).

    :param skip: template fields left as they are.
    """
    rendered = copy.copy(task)
    for name in task.template_fields:
        if name not in skip:
            setattr(rendered, name, task.render_template(getattr(task, name), context))
    return rendered
