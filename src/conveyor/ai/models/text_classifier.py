"""An offline model for labelling text: an embedded classifier trained on a labelled CSV.

    from conveyor import TextClassifierModel

    risk_model = TextClassifierModel(
        "risk_training.csv",                 # text,label rows; next to the DAG or include/models/
        text="note",                          # the model-input field(s) to read, or a callable
        label_field="risk",                   # the output field the label goes to
        extra=lambda label, data: {"summary": first_sentence(data["note"])},
    )

The classifier (TF-IDF, logistic regression, calibrated probabilities: :mod:`.classifier`) is
trained the first time a process needs it and cached by the training data's hash. The confidence
of each answer is the calibrated probability of its label. A whole chunk is predicted in one
vectorised call, in a worker thread, so the step's ledger writes overlap the next chunk.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from conveyor.ai.models.base import ModelInput, Prediction, StepModel


class TextClassifierModel(StepModel):
    """A label for each item's text, with the classifier's calibrated probability as confidence.

    :param training_file: a CSV with ``text`` and ``label`` columns (relative: next to the DAG file,
        then the include folder's ``models/``).
    :param text: what the classifier reads: a model-input field, several (joined with ``; ``), or a
        callable of the model input.
    :param label_field: the output field the predicted label goes to.
    :param extra: (label, model input) -> more output fields (e.g. a drafted sentence).
    """

    def __init__(
        self,
        training_file: str,
        *,
        text: str | Sequence[str] | Callable[[dict[str, Any]], str] = "text",
        label_field: str = "label",
        extra: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        from conveyor.ai.models.classifier import get_classifier

        self.classifier = get_classifier(training_file)
        self.key = f"local:{self.classifier.key}"
        self.text = text
        self.label_field = label_field
        self.extra = extra

    def text_of(self, data: dict[str, Any]) -> str:
        if callable(self.text):
            return str(self.text(data))
        fields = [self.text] if isinstance(self.text, str) else list(self.text)
        return "; ".join(str(data.get(f) or "") for f in fields).strip("; ")

    def _predict(self, inputs: Sequence[ModelInput]) -> list[Prediction]:
        labels = self.classifier.predict([self.text_of(i.data) for i in inputs])
        predictions = []
        for item, (label, probability) in zip(inputs, labels, strict=True):
            output = {self.label_field: label}
            if self.extra is not None:
                output.update(self.extra(label, item.data))
            predictions.append(
                Prediction(
                    output=output,
                    confidence=round(probability, 4),
                    model=self.key,
                    detail={"method": "calibrated_probability"},
                )
            )
        return predictions

    async def predict_many(self, inputs: Sequence[ModelInput]) -> list[Prediction]:
        return await asyncio.to_thread(self._predict, inputs)
