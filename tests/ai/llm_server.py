"""A real OpenAI-compatible chat-completions server on 127.0.0.1 for the AI step's tests and bench.

It answers ``POST /v1/chat/completions`` (and the same through ``POST /v1/responses``, the
Responses API) with structured output for whatever JSON schema the
request carries (``response_format`` json_schema, or a tool's parameters), like a small model
would: enum fields get the value whose words appear in the prompt, text fields get a sentence
made from the prompt. Faults are injected through ``POST /control/config``:

* ``latency``: seconds every answer takes (``hang_seconds`` for the ``hang`` fault);
* ``max_concurrency``: requests served at once (the rest wait, as behind a rate-limited gateway);
* ``faults``: a queue consumed one per request, e.g. ``[{"kind": "429", "retry_after": 1}]``;
* ``rules``: applied to every request whose prompt contains ``match`` (and whose model is
  ``model``, when a rule names one), e.g.
  ``{"match": "EX-7", "kind": "malformed"}`` or ``{"match": "EX-8", "label_logprob": -1.6}``
  or ``{"match": "EX-9", "alternate": ["quality", "other"]}`` (answers cycle: disagreement);
  ``times`` limits how many requests a rule applies to;
* ``fail_all``: a fault kind for every request (``"500"``), until reset;

Fault kinds: ``429`` (with ``Retry-After``), ``500``, ``503``, ``400``, ``hang``, ``malformed``
(truncated JSON), ``wrong_schema`` (valid JSON of the wrong shape), ``output`` (a given answer).

Batches (several items in one request, ``conveyor.ai.batching``): when the schema is
``{answers: [{item, ...}]}`` the prompt is split at its ``### Item <n>`` headings and each item is
answered from its own text. Queued faults, ``fail_all``, rules of the request-level kinds
(HTTP errors, ``hang``, ``malformed``, ``wrong_schema``) and rules with a ``latency`` hit the
whole request when they match any of its items. The other rules shape only the answer of the item
they match, with two more kinds: ``skip`` (the item is left out of the answer) and ``invalid``
(its answer has the wrong fields).

``GET /control/stats`` reports every request: count, kinds, arrival times and prompts, so a test
can prove how often each item was sent. Run it with ``python -m tests.ai.llm_server``; it prints
its port on the first line of stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import socket
import sys
import time
from collections import Counter
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

_DEFAULTS: dict[str, Any] = {
    "latency": 0.0,
    "hang_seconds": 30.0,
    "max_concurrency": None,
    "faults": [],
    "rules": [],
    "fail_all": None,
    "label_logprob": -0.02,
    "record_prompts": True,
}


class State:
    def __init__(self) -> None:
        self.config: dict[str, Any] = json.loads(json.dumps(_DEFAULTS))
        self.semaphore: asyncio.Semaphore | None = None
        self.reset_stats()

    def reset_stats(self) -> None:
        self.calls = 0
        self.kinds: Counter[str] = Counter()
        self.prompts: list[str] = []
        self.arrivals: list[float] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.alternations: Counter[str] = Counter()
        self.endpoints: Counter[str] = Counter()


STATE = State()


def _user_text(body: dict[str, Any]) -> str:
    parts: list[str] = []
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(c.get("text", "") for c in content if isinstance(c, dict))
    return "\n".join(parts)


_REQUEST_KINDS = {"429", "500", "502", "503", "400", "hang", "malformed", "wrong_schema"}


def _request_level(rule: dict[str, Any]) -> bool:
    """Whether a rule acts on a whole batch request: a fault of the request, or its latency."""
    return str(rule.get("kind", "ok")) in _REQUEST_KINDS or "latency" in rule


def _pick_fault(text: str, model: str, request_level: bool | None = None) -> dict[str, Any]:
    """The rule for a request (``request_level`` None), or only its request-level (True) or
    per-item (False) rules, for a batch."""
    config = STATE.config
    if config["faults"] and request_level is not False:
        return config["faults"].pop(0)
    for rule in config["rules"]:
        if rule.get("model") and rule["model"] != model:
            continue
        if rule.get("times") == 0:
            continue
        if request_level is not None and _request_level(rule) != request_level:
            continue
        if rule.get("match") is None or rule["match"] in text:
            if rule.get("times"):
                rule["times"] -= 1
            return rule
    if config["fail_all"] and request_level is not False:
        return {"kind": config["fail_all"]}
    return {"kind": "ok"}


def _error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": kind}},
        status_code=status,
        headers=headers,
    )


# -- answering a schema ----------------------------------------------------------------------


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema:
        return _resolve(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in schema:
        options = [s for s in schema["anyOf"] if s.get("type") != "null"]
        return _resolve(options[0], defs) if options else {"type": "null"}
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _resolve(schema["allOf"][0], defs)
    return schema


def _words(text: str) -> set[str]:
    return {w[:5] for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 2}


def _choose(options: list[Any], text: str, rule: dict[str, Any], path: str) -> Any:
    alternate = rule.get("alternate")
    if alternate:
        key = f"{rule.get('match')}:{path}"
        choice = alternate[STATE.alternations[key] % len(alternate)]
        STATE.alternations[key] += 1
        return choice
    words = _words(text)
    scored = [(len(_words(str(o).replace("_", " ")) & words), -i, o) for i, o in enumerate(options)]
    return max(scored)[2]


def _answer(schema: dict[str, Any], defs: dict[str, Any], text: str, rule: dict[str, Any], path: str = "") -> Any:
    schema = _resolve(schema, defs)
    if "enum" in schema:
        return _choose(schema["enum"], text, rule, path)
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: _answer(sub, defs, text, rule, f"{path}.{name}") for name, sub in props.items()}
    if kind == "array":
        return [_answer(schema.get("items", {}), defs, text, rule, f"{path}[]")]
    if kind == "integer":
        return max(1, int(schema.get("minimum", 1)))
    if kind == "number":
        return float(schema.get("minimum", 1.0)) or 1.0
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    # One sentence made of the prompt itself (a lazy but faithful summariser).
    flat = re.sub(r"[.!?](?=\s)", ",", " ".join(text.split()))
    return f"{path.rsplit('.', 1)[-1].replace('_', ' ').capitalize()}: {flat[:290]}"


def _schema_of(body: dict[str, Any]) -> tuple[str, dict[str, Any] | None, str | None]:
    """('json' | 'tool' | 'text', schema, tool name)."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return "json", fmt["json_schema"].get("schema", {}), None
    tools = body.get("tools") or []
    if tools:
        fn = tools[0]["function"]
        return "tool", fn.get("parameters", {}), fn["name"]
    if fmt.get("type") == "json_object":
        return "json", {"type": "object", "properties": {}}, None
    return "text", None, None


def _logprobs(content: str, label_spans: list[tuple[int, int, float]], top: int) -> dict[str, Any]:
    """Per-token log-probabilities; each (start, end, logprob) label span puts its logprob on its
    first token (the whole uncertainty of a label sits there, as with a real model)."""
    # Like a BPE tokenizer: a word carries the space before it; punctuation runs stay together.
    tokens = re.findall(r" ?\w+| ?[^\w\s]+|\s+", content)
    out: list[dict[str, Any]] = []
    bounds: list[tuple[int, int]] = []
    position = 0
    for token in tokens:
        bounds.append((position, position + len(token)))
        position += len(token)
        out.append({"token": token, "bytes": list(token.encode()), "logprob": -0.0005, "top_logprobs": []})
    for a, b, logprob in label_spans:
        first = next((i for i, (start, end) in enumerate(bounds) if start < b and end > a), None)
        if first is not None:
            out[first]["logprob"] = logprob
    for i, entry in enumerate(out):
        alts = [{"token": entry["token"], "bytes": entry["bytes"], "logprob": entry["logprob"]}]
        if top > 1:
            rest = math.log(max(1e-9, 1 - math.exp(entry["logprob"])))
            alts.append({"token": "other", "bytes": list(b"other"), "logprob": rest})
        entry["top_logprobs"] = alts[:top] if top else []
        out[i] = entry
    return {"content": out, "refusal": None}


def _label_spans(content: str, value: Any, logprob: float, after: int = 0) -> list[tuple[int, int, float]]:
    """Where the label-like values (lower-case words) of an answer sit in its JSON text."""
    spans: list[tuple[int, int, float]] = []
    if isinstance(value, dict):
        for key, sub in value.items():
            if isinstance(sub, str) and re.fullmatch(r"[a-z_]+", sub):
                needle = f'"{key}": "{sub}"'
                at = content.find(needle, after)
                if at >= 0:
                    start = at + len(f'"{key}": "')
                    spans.append((start, start + len(sub), logprob))
    return spans


_ITEM_HEADING = re.compile(r"^### Item (\d+)$", re.MULTILINE)


def _batch_entry_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The answer schema of a batch request (``{answers: [{item, ...}]}``), else None."""
    answers = schema.get("properties", {}).get("answers")
    if not answers or answers.get("type") != "array":
        return None
    entry = _resolve(answers.get("items", {}), schema.get("$defs", {}))
    return entry if "item" in entry.get("properties", {}) else None


def _batch_answer(
    schema: dict[str, Any], entry_schema: dict[str, Any], text: str, model: str
) -> tuple[dict[str, Any], list[tuple[int, int, float]]]:
    """Each item of the prompt answered from its own section; and the label spans of the answers."""
    defs = schema.get("$defs", {})
    fields = {k: v for k, v in entry_schema.get("properties", {}).items() if k != "item"}
    heads = list(_ITEM_HEADING.finditer(text))
    entries: list[tuple[dict[str, Any], float]] = []
    for k, head in enumerate(heads):
        section = text[head.end() : heads[k + 1].start() if k + 1 < len(heads) else len(text)]
        rule = _pick_fault(section, model, request_level=False)
        kind = str(rule.get("kind", "ok"))
        number = int(head.group(1))
        if kind == "skip":
            continue
        if kind == "output":
            answer = dict(rule["output"])
        elif kind == "invalid":
            answer = {"answer": "not this item's schema"}
        else:
            answer = {name: _answer(sub, defs, section, rule, f".{name}") for name, sub in fields.items()}
        entries.append(({"item": number, **answer}, float(rule.get("label_logprob", STATE.config["label_logprob"]))))
    value = {"answers": [entry for entry, _ in entries]}
    content = json.dumps(value)
    spans: list[tuple[int, int, float]] = []
    for entry, logprob in entries:
        at = content.find(f'"item": {entry["item"]}')
        spans += _label_spans(content, entry, logprob, after=max(at, 0))
    return value, spans


async def chat_completions(request: Request) -> Response:
    STATE.endpoints["chat/completions"] += 1
    return await _serve(await request.json())


async def _serve(body: dict[str, Any]) -> Response:
    """Count the request, hold a concurrency slot, and answer it as a chat completion."""
    text = _user_text(body)
    STATE.calls += 1
    STATE.arrivals.append(time.monotonic())
    if STATE.config["record_prompts"]:
        STATE.prompts.append(text)
    semaphore = STATE.semaphore
    if semaphore is not None:
        await semaphore.acquire()
    STATE.in_flight += 1
    STATE.max_in_flight = max(STATE.max_in_flight, STATE.in_flight)
    try:
        return await _respond(body, text)
    finally:
        STATE.in_flight -= 1
        if semaphore is not None:
            semaphore.release()


# -- the Responses API: the same answers in its request and response shapes ---------------------


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(c.get("text", "") for c in content or () if isinstance(c, dict))


def _as_chat_request(body: dict[str, Any]) -> dict[str, Any]:
    """A ``POST /v1/responses`` body as the chat-completions body it amounts to."""
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    given = body.get("input")
    for entry in [{"role": "user", "content": given}] if isinstance(given, str) else given or ():
        if entry.get("role") in ("system", "developer", "user", "assistant"):
            messages.append({"role": entry["role"], "content": _text_of(entry.get("content"))})
    chat: dict[str, Any] = {"model": body.get("model"), "messages": messages}
    fmt = (body.get("text") or {}).get("format") or {}
    if fmt.get("type") == "json_schema":
        chat["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": fmt.get("name"), "schema": fmt.get("schema", {}), "strict": fmt.get("strict")},
        }
    chat["logprobs"] = "message.output_text.logprobs" in (body.get("include") or ())
    return chat


def _as_response(completion: dict[str, Any]) -> dict[str, Any]:
    """A chat completion as the Responses API's ``response`` object (one output message)."""
    choice = completion["choices"][0]
    usage = completion["usage"]
    text = {
        "type": "output_text",
        "text": choice["message"]["content"],
        "annotations": [],
        "logprobs": (choice.get("logprobs") or {}).get("content") or [],
    }
    return {
        "id": completion["id"].replace("chatcmpl", "resp"),
        "object": "response",
        "created_at": completion["created"],
        "status": "completed",
        "model": completion["model"],
        "output": [
            {
                "type": "message",
                "id": f"msg_{STATE.calls}",
                "status": "completed",
                "role": "assistant",
                "content": [text],
            }
        ],
        "usage": {
            "input_tokens": usage["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage["total_tokens"],
        },
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
    }


async def responses(request: Request) -> Response:
    STATE.endpoints["responses"] += 1
    reply = await _serve(_as_chat_request(await request.json()))
    if reply.status_code != 200:
        return reply  # errors have the same shape in both APIs
    return JSONResponse(_as_response(json.loads(bytes(reply.body))))


async def _respond(body: dict[str, Any], text: str) -> Response:
    mode, schema, tool_name = _schema_of(body)
    entry_schema = _batch_entry_schema(schema) if schema is not None else None
    # In a batch, only request-level faults hit the whole request; the rest shape single answers.
    rule = _pick_fault(text, str(body.get("model", "")), request_level=True if entry_schema else None)
    kind = str(rule.get("kind", "ok"))
    STATE.kinds[kind] += 1
    latency = float(rule.get("latency", STATE.config["latency"]))
    if kind == "hang":
        await asyncio.sleep(float(rule.get("seconds", STATE.config["hang_seconds"])))
    elif latency:
        await asyncio.sleep(latency)
    if kind == "429":
        retry_after = rule.get("retry_after", 1)
        return _error(429, "Rate limit reached for requests", "rate_limit_exceeded", {"Retry-After": str(retry_after)})
    if kind in {"500", "502", "503"}:
        return _error(int(kind), "The server had an error while processing your request", "server_error")
    if kind == "400":
        return _error(400, "Invalid request: unsupported parameter", "invalid_request_error")

    value: Any
    label_logprob = float(rule.get("label_logprob", STATE.config["label_logprob"]))
    label_spans: list[tuple[int, int, float]] | None = None
    if entry_schema is not None and kind not in _REQUEST_KINDS:
        value, label_spans = _batch_answer(schema, entry_schema, text, str(body.get("model", "")))  # type: ignore[arg-type]
    elif kind == "output":
        value = rule["output"]
    elif schema is not None:
        value = _answer(schema, schema.get("$defs", {}), text, rule)
    else:
        value = None
    if kind == "wrong_schema":
        value = {"answer": "I think this is fine", "score": "high"}
    if mode == "text" and kind != "output":
        content = " ".join(text.split())[:200] or "ok"
    else:
        content = json.dumps(value)
    if kind == "malformed":
        content = content[: max(1, len(content) // 2)]

    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    finish = "stop"
    if mode == "tool":
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{STATE.calls}",
                    "type": "function",
                    "function": {"name": tool_name, "arguments": content},
                }
            ],
        }
        finish = "tool_calls"
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
    if body.get("logprobs") and mode != "tool":
        if label_spans is None:
            label_spans = _label_spans(content, value, label_logprob)
        choice["logprobs"] = _logprobs(content, label_spans, int(body.get("top_logprobs") or 0))
    prompt_tokens = max(1, len(text) // 4)
    completion_tokens = max(1, len(content) // 4)
    return JSONResponse(
        {
            "id": f"chatcmpl-{STATE.calls}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    )


async def set_config(request: Request) -> Response:
    update = await request.json()
    if update.pop("reset", False):
        STATE.config = json.loads(json.dumps(_DEFAULTS))
        STATE.reset_stats()
    STATE.config.update(update)
    limit = STATE.config.get("max_concurrency")
    STATE.semaphore = asyncio.Semaphore(int(limit)) if limit else None
    return JSONResponse(STATE.config)


async def stats(request: Request) -> Response:
    return JSONResponse(
        {
            "calls": STATE.calls,
            "kinds": dict(STATE.kinds),
            "prompts": STATE.prompts,
            "arrivals": STATE.arrivals,
            "max_in_flight": STATE.max_in_flight,
            "endpoints": dict(STATE.endpoints),
            "pending_faults": len(STATE.config["faults"]),
        }
    )


app = Starlette(
    routes=[
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/responses", responses, methods=["POST"]),
        Route("/control/config", set_config, methods=["POST"]),
        Route("/control/stats", stats, methods=["GET"]),
    ]
)


class LLMServer:
    """The server in a process of its own, and its control endpoints (for tests and the bench).

    :param python: the interpreter to run it with (the test's own by default).
    """

    def __init__(self, python: str | None = None) -> None:
        import os
        import subprocess
        from pathlib import Path

        repo = Path(__file__).resolve().parents[2]
        env = dict(os.environ, PYTHONPATH=str(repo) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.process = subprocess.Popen(
            [python or sys.executable, "-m", "tests.ai.llm_server"],
            cwd=repo,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline().strip())
        self.url = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.url}/v1"
        deadline = time.monotonic() + 20
        while True:
            try:
                self.stats()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _request(self, method: str, path: str, payload: Any = None) -> Any:
        import urllib.request

        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def configure(self, reset: bool = True, **config: Any) -> dict[str, Any]:
        """Set faults and latency (see the module doc); ``reset`` clears config and stats first."""
        return self._request("POST", "/control/config", {"reset": reset, **config})

    def stats(self) -> dict[str, Any]:
        return self._request("GET", "/control/stats")

    def calls_for(self, needle: str) -> int:
        """How many requests carried ``needle`` in their prompt."""
        return sum(needle in prompt for prompt in self.stats()["prompts"])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except Exception:
            self.process.kill()


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, backlog=1024, timeout_keep_alive=30)
    server = uvicorn.Server(config)
    asyncio.run(server.serve(sockets=[sock]))


if __name__ == "__main__":
    sys.exit(main())
