"""What every model of the AI step takes and gives: model inputs in, predictions out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ModelInput:
    """One item as the model sees it.

    :param item_id: the ledger item.
    :param data: the rendered input (what is sent, and what the rule checks compare against).
    :param input_hash: sha256 of the canonical ``data`` (the cache key's input part).
    """

    item_id: str
    data: dict[str, Any]
    input_hash: str


@dataclass
class Prediction:
    """A model's answer for one item, or why there is none.

    :param output: the schema-valid output (JSON-ready), None on error.
    :param confidence: the answer's confidence (None: the model gave none).
    :param model: the key of the model that answered.
    :param calls: requests sent for this item in this run (0 for a cache hit or a local model).
    :param cached: answered from the result cache.
    :param error: :class:`~conveyor.ai.errors.ModelCallError` or :class:`~conveyor.ai.errors.BreakerOpen`.
    :param detail: how the confidence was obtained (method, samples...).
    """

    output: dict[str, Any] | None = None
    confidence: float | None = None
    model: str = ""
    calls: int = 0
    cached: bool = False
    error: Exception | None = None
    detail: dict[str, Any] = field(default_factory=dict)


class StepModel(ABC):
    """A model the AI step can call.

    ``key`` identifies the model in the result cache and in every item's result; ``remote``
    models go through the cache, the breaker and bounded concurrency, local ones run in-process.
    """

    key: str
    remote: bool = False

    @abstractmethod
    async def predict_many(self, inputs: Sequence[ModelInput]) -> list[Prediction]:
        """One prediction per input, in order. Never raises for a single item's failure."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
