"""The AI tasks: what one AI step asks of a model, declared once, used by :class:`AIStepOperator`.

An :class:`AITask` binds a prompt (file and version), the output schema, how a ledger item
becomes model input, the embedded default model, the rule checks and where items go. Three are
declared for the bundled workflows and registered by name:

* :data:`CLASSIFY_EXCEPTION` (``supplier_exceptions``, ``validated -> ai_processed``): category
  of the exception and a one-sentence draft for the report;
* :data:`EXTRACT_INVOICE_FIELDS` (``invoice_processing``, ``received -> extracted``): the
  extracted-fields schema of ``include/README.md``;
* :data:`CLASSIFY_SPEND` (``invoice_processing``, ``validated -> classified``): the spend
  category, added to the extracted fields.

Importing this module is cheap (pydantic and the standard library only): DAG files may.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from conveyor.ai.checks import InRange, Mentions, NotVague, OneOf, OneSentence, Required
from conveyor.ai.resources import read_prompt
from conveyor.ai.schemas import (
    CURRENCIES,
    ExceptionClassification,
    InvoiceFields,
    SpendClassification,
)


class InputError(ValueError):
    """An item's payload cannot become model input; the message tells the reviewer why."""


@dataclass(frozen=True)
class ItemView:
    """What an AI task may read of a ledger item."""

    item_id: str
    payload: dict[str, Any]
    ai_result: Any = None


def _replace(previous: Any, output: dict[str, Any]) -> Any:
    return output


@dataclass(frozen=True)
class AITask:
    """One kind of AI step.

    :param name: the registered name (``classify_exception``...), also the step's id in summaries.
    :param workflow: the workflow whose items it reads.
    :param prompt_file: the instructions, ``include/prompts/<prompt_file>``.
    :param prompt_version: declared version; the prompt text's hash is appended, so an edited
        prompt never reuses cached answers.
    :param output_schema: the pydantic model every answer must validate against.
    :param render: item -> model input (a JSON-ready dict); raises :class:`InputError`.
    :param local_model: name of the embedded default model (``conveyor.ai.models.local``).
    :param checks: rule checks run on every parsed answer (``conveyor.ai.checks``).
    :param label_field: the output field holding the label (for log-probability confidence
        and sample agreement); None for free-form outputs.
    :param from_status: where its items wait.
    :param to_status: where passing items go (and where an approved review resumes).
    :param merge: (previous ai_result, output) -> the item's new ai_result.
    """

    name: str
    workflow: str
    prompt_file: str
    prompt_version: str
    output_schema: type[BaseModel]
    render: Callable[[ItemView], dict[str, Any]]
    local_model: str
    checks: tuple[Any, ...] = ()
    label_field: str | None = None
    from_status: str = "validated"
    to_status: str = "ai_processed"
    merge: Callable[[Any, dict[str, Any]], Any] = field(default=_replace)

    @property
    def instructions(self) -> str:
        return read_prompt(self.prompt_file)[0]

    @property
    def version(self) -> str:
        """``<declared version>+<prompt hash>``: the cache key's prompt part."""
        return f"{self.prompt_version}+{read_prompt(self.prompt_file)[1]}"

    def model_input(self, item: ItemView, *, hashed: bool = True) -> tuple[dict[str, Any], str]:
        """(model input, its hash) for one item; the hash is only computed when ``hashed``."""
        from conveyor.ledger.store import input_hash

        data = self.render(item)
        return data, input_hash(data) if hashed else ""

    @staticmethod
    def user_message(data: Mapping[str, Any]) -> str:
        """The model input as the user turn: ``key: value`` lines, documents in a fenced block."""
        lines: list[str] = []
        for key, value in data.items():
            if isinstance(value, str) and "\n" in value:
                lines.append(f"{key}:\n```\n{value.strip()}\n```")
            elif isinstance(value, list | dict):
                lines.append(f"{key}: {json.dumps(value, ensure_ascii=False, default=str)}")
            else:
                lines.append(f"{key}: {value}")
        return "\n".join(lines)


# -- supplier exceptions -----------------------------------------------------------------------

_EXCEPTION_FIELDS = (
    "exception_id",
    "supplier_id",
    "supplier_name",
    "po_number",
    "exception_date",
    "amount",
    "currency",
    "quantity_ordered",
    "quantity_received",
    "notes",
)


def render_exception(item: ItemView) -> dict[str, Any]:
    """The extract row's columns; an exception without notes has nothing to classify."""
    data = {k: item.payload.get(k) for k in _EXCEPTION_FIELDS if k in item.payload}
    if not str(data.get("notes") or "").strip():
        raise InputError("the exception has no notes: there is nothing to classify")
    return data


CLASSIFY_EXCEPTION = AITask(
    name="classify_exception",
    workflow="supplier_exceptions",
    prompt_file="classify_exception.md",
    prompt_version="v1",
    output_schema=ExceptionClassification,
    render=render_exception,
    local_model="exception_classifier",
    checks=(
        Required(("category", "draft")),
        NotVague("draft"),
        OneSentence("draft"),
        Mentions(
            "draft", ("po_number", "supplier_name"), labels={"po_number": "PO", "supplier_name": "supplier"}
        ),
    ),
    label_field="category",
    from_status="validated",
    to_status="ai_processed",
)


# -- invoices: field extraction ----------------------------------------------------------------


def render_invoice_document(item: ItemView) -> dict[str, Any]:
    """The document's name, format and text (read from ``payload.path`` or ``payload.content``)."""
    payload = item.payload
    name = payload.get("name") or (Path(payload["path"]).name if payload.get("path") else item.item_id)
    fmt = str(payload.get("format") or Path(str(name)).suffix.lstrip(".")).lower()
    content = payload.get("content")
    if content is None:
        path = payload.get("path")
        if not path:
            raise InputError("the item has neither a document path nor document content")
        try:
            content = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(f"document {path} not found (moved or deleted after intake)") from None
        except UnicodeDecodeError:
            raise InputError(f"document {path} is not UTF-8 text") from None
    if not str(content).strip():
        raise InputError(f"document {name} is empty")
    return {"name": str(name), "format": fmt, "content": str(content)}


EXTRACT_INVOICE_FIELDS = AITask(
    name="extract_invoice_fields",
    workflow="invoice_processing",
    prompt_file="extract_invoice_fields.md",
    prompt_version="v1",
    output_schema=InvoiceFields,
    render=render_invoice_document,
    local_model="invoice_extractor",
    checks=(
        Required(("vendor", "invoice_number", "invoice_date", "currency", "total", "line_items")),
        OneOf("currency", CURRENCIES),
        InRange("total", 0, 1_000_000),
    ),
    label_field=None,
    from_status="received",
    to_status="extracted",
)


# -- invoices: spend classification ------------------------------------------------------------


def render_spend(item: ItemView) -> dict[str, Any]:
    """Vendor, line descriptions and total from the extracted fields (or the payload)."""
    source: Mapping[str, Any] = item.ai_result if isinstance(item.ai_result, Mapping) else item.payload
    lines = source.get("line_items") or []
    descriptions = [
        str(li.get("description")) for li in lines if isinstance(li, Mapping) and li.get("description")
    ]
    if not descriptions and not source.get("vendor"):
        raise InputError("no extracted vendor or line items to classify")
    return {
        "vendor": source.get("vendor"),
        "vendor_id": source.get("vendor_id"),
        "descriptions": descriptions,
        "total": source.get("total"),
        "currency": source.get("currency"),
    }


def merge_spend(previous: Any, output: dict[str, Any]) -> Any:
    """The extracted fields stay; the category joins them as ``spend_category``."""
    base = dict(previous) if isinstance(previous, Mapping) else {}
    return {**base, "spend_category": output["category"]}


CLASSIFY_SPEND = AITask(
    name="classify_spend",
    workflow="invoice_processing",
    prompt_file="classify_spend.md",
    prompt_version="v1",
    output_schema=SpendClassification,
    render=render_spend,
    local_model="spend_classifier",
    checks=(Required(("category",)),),
    label_field="category",
    from_status="validated",
    to_status="classified",
    merge=merge_spend,
)


AI_TASKS: dict[str, AITask] = {
    t.name: t for t in (CLASSIFY_EXCEPTION, EXTRACT_INVOICE_FIELDS, CLASSIFY_SPEND)
}


def get_ai_task(task: AITask | str) -> AITask:
    """A task definition, or the one registered under that name."""
    if isinstance(task, AITask):
        return task
    try:
        return AI_TASKS[task]
    except KeyError:
        raise ValueError(f"unknown AI task {task!r}; known: {', '.join(sorted(AI_TASKS))}") from None


def register_ai_task(task: AITask) -> AITask:
    """Declare another AI task (a project's own step); names are unique."""
    known = AI_TASKS.get(task.name)
    if known is not None and known is not task:
        raise ValueError(f"an AI task named {task.name!r} is already registered")
    AI_TASKS[task.name] = task
    return task


__all__ = [
    "AITask",
    "AI_TASKS",
    "CLASSIFY_EXCEPTION",
    "CLASSIFY_SPEND",
    "EXTRACT_INVOICE_FIELDS",
    "InputError",
    "ItemView",
    "get_ai_task",
    "register_ai_task",
]
