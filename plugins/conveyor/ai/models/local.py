"""The default models: offline, shipped with the project, no key and no network.

* ``exception_classifier``: the embedded text classifier over the exception note
  (``include/models/supplier_exception_notes.csv``) plus the deterministic drafter.
* ``invoice_extractor``: the deterministic parser of the three inbox formats.
* ``spend_classifier``: the embedded text classifier over vendor and line descriptions
  (``include/models/spend_lines.csv``).

They run a whole chunk in one vectorised call, in a worker thread so the step's ledger writes
overlap with the next chunk's predictions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from conveyor.ai.models.base import ModelInput, Prediction, StepModel


class ExceptionClassifierModel(StepModel):
    """Category by the calibrated classifier, draft by the drafter."""

    training_file = "supplier_exception_notes.csv"

    def __init__(self) -> None:
        from conveyor.ai.models.classifier import get_classifier

        self.classifier = get_classifier(self.training_file)
        self.key = f"local:{self.classifier.key}"

    def _predict(self, inputs: Sequence[ModelInput]) -> list[Prediction]:
        from conveyor.ai.models.drafter import draft

        labels = self.classifier.predict([str(i.data.get("notes") or "") for i in inputs])
        return [
            Prediction(
                output={"category": label, "draft": draft(label, i.data)},
                confidence=round(probability, 4),
                model=self.key,
                detail={"method": "calibrated_probability"},
            )
            for i, (label, probability) in zip(inputs, labels, strict=True)
        ]

    async def predict_many(self, inputs: Sequence[ModelInput]) -> list[Prediction]:
        return await asyncio.to_thread(self._predict, inputs)


class InvoiceExtractorModel(StepModel):
    """Fields by the format's parser; confidence by completeness and consistency."""

    key = "local:invoice_extractor@1"

    def _predict(self, inputs: Sequence[ModelInput]) -> list[Prediction]:
        from conveyor.ai.models.extractor import extract

        predictions = []
        for i in inputs:
            result = extract(str(i.data.get("content") or ""), str(i.data.get("format") or ""))
            predictions.append(
                Prediction(
                    output=result.fields,
                    confidence=result.confidence,
                    model=self.key,
                    detail={"method": "parse_completeness", "problems": result.problems[:5]},
                )
            )
        return predictions

    async def predict_many(self, inputs: Sequence[ModelInput]) -> list[Prediction]:
        return await asyncio.to_thread(self._predict, inputs)


def spend_text(data: dict[str, Any]) -> str:
    """What the spend classifier reads: vendor and line descriptions."""
    descriptions = "; ".join(str(d) for d in data.get("descriptions") or [])
    return f"{data.get('vendor') or ''}: {descriptions}".strip(": ")


class SpendClassifierModel(StepModel):
    """Spend category by the calibrated classifier."""

    training_file = "spend_lines.csv"

    def __init__(self) -> None:
        from conveyor.ai.models.classifier import get_classifier

        self.classifier = get_classifier(self.training_file)
        self.key = f"local:{self.classifier.key}"

    def _predict(self, inputs: Sequence[ModelInput]) -> list[Prediction]:
        labels = self.classifier.predict([spend_text(i.data) for i in inputs])
        return [
            Prediction(
                output={"category": label},
                confidence=round(p, 4),
                model=self.key,
                detail={"method": "calibrated_probability"},
            )
            for label, p in labels
        ]

    async def predict_many(self, inputs: Sequence[ModelInput]) -> list[Prediction]:
        return await asyncio.to_thread(self._predict, inputs)


LOCAL_MODELS: dict[str, Callable[[], StepModel]] = {
    "exception_classifier": ExceptionClassifierModel,
    "invoice_extractor": InvoiceExtractorModel,
    "spend_classifier": SpendClassifierModel,
}


def local_model(name: str) -> StepModel:
    """The embedded model called ``name``."""
    try:
        return LOCAL_MODELS[name]()
    except KeyError:
        raise ValueError(f"unknown local model {name!r}; known: {', '.join(sorted(LOCAL_MODELS))}") from None
