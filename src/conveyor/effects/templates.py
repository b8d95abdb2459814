"""Rendering a publication with Jinja2: the user's own templates, their own columns and wording.

A template sees:

* ``items``: the items published, each a dict with ``item_id``, ``business_key``, ``payload``,
  ``ai_result`` (a reviewer's correction included), ``confidence``, ``reason``, ``run_id``;
* ``title``, ``workflow``, ``run_id``, ``run_after`` (an ISO timestamp: set for every kind of run,
  also those triggered with no logical date), ``count``;
* the filters ``money`` (``1234.5 | money`` -> ``1,234.50``), ``md`` (a Markdown table cell: pipes
  and newlines escaped, a formula-like leading ``= + - @`` neutralised) and ``sum_of``
  (``items | sum_of("payload.amount")``).

Templates ending in ``.html``/``.htm`` (before an optional ``.j2``) are HTML-escaped; a missing
variable is an error, never an empty string.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from functools import cache
from pathlib import Path
from typing import Any

from conveyor.fields import dig


def to_decimal(value: Any) -> Decimal:
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError):
        return Decimal(0)


def money(value: Any) -> str:
    return f"{to_decimal(value):,.2f}"


def markdown_cell(value: Any) -> str:
    """A value safe inside a Markdown table cell; a feed's text must not break the table or smuggle
    a formula into a spreadsheet that imports it."""
    text = "" if value is None else str(value)
    text = text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")
    return "'" + text if text[:1] in {"=", "+", "-", "@"} else text


def sum_of(items: Iterable[Any], path: str) -> Decimal:
    return sum((to_decimal(dig(i, path)) for i in items), Decimal(0))


@cache
def _environment(folder: str, autoescape: bool) -> Any:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(
        loader=FileSystemLoader(folder),
        undefined=StrictUndefined,
        autoescape=autoescape,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update({"money": money, "md": markdown_cell, "sum_of": sum_of})
    return env


def is_html(name: str) -> bool:
    stem = name[:-3] if name.endswith(".j2") else name
    return stem.endswith((".html", ".htm"))


def render_file(path: Path, context: Mapping[str, Any]) -> str:
    """Render the template file ``path`` with ``context``."""
    env = _environment(str(path.parent), is_html(path.name))
    return str(env.get_template(path.name).render(**context))


def output_name(template: Path) -> str:
    """``report.md.j2`` -> ``report.md``."""
    return template.name[:-3] if template.name.endswith(".j2") else template.name
