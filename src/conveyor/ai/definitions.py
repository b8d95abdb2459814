"""An AI task: what one AI step asks of a model, declared once next to the DAG, run by :class:`AIStepOperator`.

An :class:`AITask` binds the instructions (a prompt file, or the text itself) and their version,
the output schema every answer must validate against, how a ledger item becomes model input,
the rule checks, where items wait and go, and optionally the offline model that answers when the
step is given ``model="local"``. The library declares none: each workflow brings its own.

    from conveyor import AITask, Required, InputError

    SUMMARIZE = AITask(
        name="summarize_note",
        prompt_file="summarize_note.md",      # next to the DAG file, or include/prompts/
        output_schema=NoteSummary,            # a pydantic model
        render=lambda item: {"note": item.payload["note"]},
        checks=(Required(("summary", "risk")),),
        label_field="risk",
        to_status="summarized",
        default_model="my_project.models:RiskModel",  # optional: a StepModel, its class or "module:Class"
    )

Importing this module is cheap (pydantic and the standard library only): DAG files may.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from conveyor.errors import AIStepError


class InputError(AIStepError, ValueError):
    """An item's payload cannot become model input; the message tells the reviewer why."""


@dataclass(frozen=True)
class ItemView:
    """What an AI task may read of a ledger item.

    :param item_id: the item.
    :param payload: the item's data as received (or as a reviewer corrected it).
    :param ai_result: what earlier AI steps (or a reviewer) wrote, if anything.
    """

    item_id: str
    payload: dict[str, Any]
    ai_result: Any = None


def _replace(previous: Any, output: dict[str, Any]) -> Any:
    return output


@dataclass(frozen=True, eq=False)
class AITask:
    """One kind of AI step.

    :param name: the task's name (unique per process), also the step's id in summaries.
    :param output_schema: the pydantic model every answer must validate against.
    :param render: item -> model input (a JSON-ready dict); raises :class:`InputError`.
    :param prompt_file: the instructions as a file: relative paths are looked up next to the DAG
        file, then in the include folder (and its ``prompts/``).
    :param instructions: the instructions as text (instead of ``prompt_file``).
    :param prompt_version: declared version; the instructions' hash is appended, so an edited
        prompt never reuses cached answers.
    :param default_model: the model ``model="local"`` means: a :class:`~conveyor.ai.models.base.StepModel`,
        a class or factory returning one, or its ``"module:attribute"`` path. None: the step needs a
        ``model`` (an LLM connection id or one of those forms).
    :param checks: rule checks run on every parsed answer (``conveyor.ai.checks``).
    :param label_field: the output field holding the label (for log-probability confidence and
        sample agreement); None for free-form outputs.
    :param from_status: where its items wait.
    :param to_status: where passing items go (and where an approved review resumes).
    :param merge: (previous ai_result, output) -> the item's new ai_result.
    :param workflow: the workflow it is meant for (informational; the operator names the workflow).
    """

    name: str
    output_schema: type[BaseModel]
    render: Callable[[ItemView], dict[str, Any]]
    prompt_file: str | None = None
    instructions: str | None = None
    prompt_version: str = "v1"
    default_model: Any = None
    checks: tuple[Any, ...] = ()
    label_field: str | None = None
    from_status: str = "validated"
    to_status: str = "ai_processed"
    merge: Callable[[Any, dict[str, Any]], Any] = field(default=_replace)
    workflow: str | None = None

    def __post_init__(self) -> None:
        if (self.prompt_file is None) == (self.instructions is None):
            raise ValueError(f"AI task {self.name!r}: give prompt_file or instructions (exactly one)")
        object.__setattr__(self, "checks", tuple(self.checks))

    def prompt_text(self) -> str:
        """The instructions (a prompt file is read where :mod:`conveyor.include` finds it)."""
        if self.instructions is not None:
            return self.instructions
        from conveyor.ai.resources import read_prompt

        assert self.prompt_file is not None  # __post_init__: exactly one of the two is given
        return read_prompt(self.prompt_file)[0]

    @property
    def version(self) -> str:
        """``<declared version>+<instructions hash>``: the cache key's prompt part."""
        digest = hashlib.sha256(self.prompt_text().encode("utf-8")).hexdigest()[:10]
        return f"{self.prompt_version}+{digest}"

    def model_input(self, item: ItemView, *, hashed: bool = True) -> tuple[dict[str, Any], str]:
        """(model input, its hash) for one item; the hash is only computed when ``hashed``."""
        from conveyor.ledger.hashing import input_hash

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

    def declaration(self) -> dict[str, Any]:
        """What the task promises of its answers, as JSON (stored in the ledger when its step runs):
        the output JSON schema, the rule checks (``conveyor.ai.checks`` ones with their settings;
        others by name, marked ``custom``) and the label field."""
        return {
            "name": self.name,
            "output_schema": self.output_schema.model_json_schema(),
            "checks": [check_spec(c) for c in self.checks],
            "label_field": self.label_field,
            "prompt_version": self.prompt_version,
        }

    @property
    def fingerprint(self) -> tuple[Any, ...]:
        """What makes two declarations the same task (a re-imported DAG file declares equal ones)."""
        return (
            self.name,
            f"{self.output_schema.__module__}.{self.output_schema.__qualname__}",
            f"{getattr(self.render, '__module__', '')}.{getattr(self.render, '__qualname__', repr(self.render))}",
            self.prompt_file,
            self.instructions,
            self.prompt_version,
            self.label_field,
            self.from_status,
            self.to_status,
            tuple(repr(c) for c in self.checks),
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AITask) and self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)


def check_spec(check: Any) -> dict[str, Any]:
    """A rule check as JSON: ``{"check": "Mentions", "args": {...}}``, or ``{"check", "custom": true}``
    for a check that is not one of ``conveyor.ai.checks`` (it cannot be rebuilt outside the DAG)."""
    import dataclasses

    kind = type(check)
    if dataclasses.is_dataclass(check) and kind.__module__ == "conveyor.ai.checks":
        args = {f.name: getattr(check, f.name) for f in dataclasses.fields(check)}
        return {"check": kind.__name__, "args": json.loads(json.dumps(args, default=str))}
    name = getattr(check, "__qualname__", None) or f"{kind.__module__}.{kind.__qualname__}"
    return {"check": name, "custom": True}


AI_TASKS: dict[str, AITask] = {}


def register_ai_task(task: AITask) -> AITask:
    """Make a task known by name (for ``ai_task="<name>"``). The same declaration again is a no-op;
    a different task under a taken name is an error."""
    known = AI_TASKS.get(task.name)
    if known is not None and known != task:
        raise ValueError(f"another AI task named {task.name!r} is already registered")
    AI_TASKS[task.name] = task
    return task


def get_ai_task(task: AITask | str) -> AITask:
    """A task definition, or the one registered under that name."""
    if isinstance(task, AITask):
        return task
    try:
        return AI_TASKS[task]
    except KeyError:
        known = ", ".join(sorted(AI_TASKS)) or "none"
        raise ValueError(
            f"unknown AI task {task!r}; registered: {known}. Pass the AITask object itself, or register it "
            "with conveyor.register_ai_task"
        ) from None


__all__ = ["AITask", "AI_TASKS", "InputError", "ItemView", "get_ai_task", "register_ai_task"]
