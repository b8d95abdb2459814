"""The AI step: a model over a run's items with confidence, rule checks, cache, breaker, fallback.

* :mod:`conveyor.ai.operators`: :class:`AIStepOperator`, what DAGs use.
* :mod:`conveyor.ai.definitions`: the AI tasks (prompt, schema, input, checks) of the bundled
  workflows: ``CLASSIFY_EXCEPTION``, ``EXTRACT_INVOICE_FIELDS``, ``CLASSIFY_SPEND``.
* :mod:`conveyor.ai.runner`: the engine (chunks, checkpoint, degradation); its parts:
  :mod:`~conveyor.ai.step_config`, :mod:`~conveyor.ai.answering` (models, fallback, cache),
  :mod:`~conveyor.ai.judging` (an answer to passed, review or deferred), :mod:`~conveyor.ai.committing`.
* :mod:`conveyor.ai.models`: the embedded models (classifier, extractor, drafter) and the LLM.
* :mod:`conveyor.ai.checks`, :mod:`conveyor.ai.confidence`, :mod:`conveyor.ai.cache`,
  :mod:`conveyor.ai.breaker`, :mod:`conveyor.ai.retries`: one guardrail each.

Nothing is imported here: scikit-learn, pydantic-ai and openai load only when a step runs.
"""

from __future__ import annotations
