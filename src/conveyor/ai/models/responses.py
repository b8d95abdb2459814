"""Reading a model's response: its text and log-probabilities, and why an answer did not validate."""

from __future__ import annotations

from typing import Any


def validation_summary(exc: Exception, limit: int = 3) -> str:
    """What failed in an answer that did not validate, short enough for a reason a person reads."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            parts = [
                f"{'.'.join(str(p) for p in e.get('loc', ())) or '(answer)'}: {e.get('msg')}" for e in errors()[:limit]
            ]
            return "; ".join(parts)
        except Exception:
            pass
    return str(exc).splitlines()[0][:200]


def text_and_logprobs(response: Any) -> tuple[str, list[Any]]:
    """The answer's text and its token log-probabilities, wherever the API put them."""
    from pydantic_ai.messages import TextPart

    text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
    # Chat completions put them on the response; the Responses API on each text part.
    logprobs = (response.provider_details or {}).get("logprobs") or [
        lp
        for p in response.parts
        if isinstance(p, TextPart)
        for lp in ((p.provider_details or {}).get("logprobs") or [])
    ]
    return text, logprobs
