"""Hostile input answers 400 naming the problem, before any route or the ledger sees it.

PostgreSQL cannot store a NUL character (``\\u0000``) in text or JSON, a lone surrogate
(``"\\ud800x"``) is no Unicode at all, and ``NaN``, ``Infinity`` or ``1e400`` (which Python's JSON
reads as infinity) are no JSON numbers. Sent in a path (an item id), a query (a run id, a search)
or a JSON body (a comment, a correction), each used to reach the database and answer 500, and
the keep-alive connection was reset after it. This ASGI middleware of the Conveyor app checks the
request first and answers ``400 {"detail": ...}`` naming where the problem is.
"""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import unquote_to_bytes

from conveyor.errors import ReviewError
from conveyor.review.coercion import text_problem

#: Largest JSON body the app reads (a bulk decision of 5,000 ids is ~200 kB).
MAX_BODY_BYTES = 8 * 1024 * 1024


class InputRejected(ReviewError, ValueError):
    """A request part that cannot be processed; the message names it."""


def check_url_part(raw: bytes, what: str) -> None:
    """A percent-encoded path or query must decode to UTF-8 text without NUL characters."""
    decoded = unquote_to_bytes(raw.replace(b"+", b" "))
    try:
        text = decoded.decode("utf-8")
    except UnicodeDecodeError:
        raise InputRejected(f"the {what} is not valid UTF-8 (a lone surrogate?)") from None
    if "\x00" in text:
        raise InputRejected(f"the {what} contains a NUL character (\\u0000)")


def _reject_constant(name: str) -> Any:
    raise InputRejected(f"the JSON body holds {name}, which is not a JSON number")


def check_json(body: bytes) -> None:
    """The body must be JSON holding finite numbers and storable text, all the way down."""
    try:
        value = json.loads(body, parse_constant=_reject_constant)
    except InputRejected:
        raise
    except (ValueError, RecursionError):
        return  # not JSON: the route's own validation answers 422
    problem = _walk(value, "")
    if problem:
        raise InputRejected(problem)


def _walk(value: Any, where: str, depth: int = 0) -> str | None:
    if depth > 64:
        return "the JSON body is nested too deeply"
    label = where or "the JSON body"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{label} is not a finite number (too large for a JSON number?)"
    if isinstance(value, str):
        found = text_problem(value)
        return f"{label} {found}" if found else None
    if isinstance(value, dict):
        for key, inner in value.items():
            found = text_problem(key)
            if found:
                return f"a field name in {label} {found}"
            found = _walk(inner, f"{where}.{key}" if where else key, depth + 1)
            if found:
                return found
    elif isinstance(value, list):
        for position, inner in enumerate(value):
            found = _walk(inner, f"{where}[{position}]", depth + 1)
            if found:
                return found
    return None


class InputGuard:
    """ASGI middleware: path, query and JSON body checked before the app (see the module docstring)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            check_url_part(scope.get("raw_path") or scope.get("path", "").encode("utf-8", "surrogatepass"), "path")
            check_url_part(scope.get("query_string") or b"", "query")
        except InputRejected as exc:
            await _answer(send, 400, str(exc))
            return
        if scope.get("method") not in ("POST", "PUT", "PATCH", "DELETE"):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                await _answer(send, 413, f"the request body is larger than {MAX_BODY_BYTES:,} bytes")
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if body:
            try:
                check_json(body)
            except InputRejected as exc:
                await _answer(send, 400, str(exc))
                return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            message: dict[str, Any] = await receive()
            return message

        await self.app(scope, replay, send)


async def _answer(send: Any, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
