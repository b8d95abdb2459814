"""The inspection-notes workflow's own parts: declaration, output schema, AI task, offline model."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from conveyor import AITask, NotVague, Required, ReviewField, TextClassifierModel, Workflow

INSPECTIONS = Workflow(
    name="inspection_notes",
    chain=("received", "validated", "summarized", "published"),
    description="Field inspection notes summarized for site managers, high risks first",
    ai_outputs=("summarized",),
    source_field="site_id",
    review_card=("site_name", "inspector", ReviewField("note", kind="long"),
                 ReviewField("ai_result.risk", "risk", "label"), ReviewField("ai_result.summary", kind="long"),
                 "confidence"),
)


class InspectionSummary(BaseModel):
    risk: Literal["low", "medium", "high"]
    summary: str


def first_sentence(note: str) -> str:
    return note.split(";")[0].strip().rstrip(".") + "."


SUMMARIZE = AITask(
    name="summarize_inspection",
    prompt_file="summarize_inspection.md",
    output_schema=InspectionSummary,
    render=lambda item: {"site": item.payload["site_name"], "note": item.payload["note"]},
    checks=(Required(("risk", "summary")), NotVague("summary")),
    label_field="risk",
    to_status="summarized",
    default_model=lambda: TextClassifierModel(
        "data/inspection_notes/training.csv", text="note", label_field="risk",
        extra=lambda risk, data: {"summary": f"{data['site']}: {first_sentence(data['note'])}"},
    ),
)
