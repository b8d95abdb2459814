"""The AI step's models: embedded (:mod:`.local`: classifier, extractor, drafter) and LLMs (:mod:`.llm`)."""

from __future__ import annotations
