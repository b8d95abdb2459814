"""``PublishOperator``: the run's items as one publication, the user's own, published exactly once.

    PublishOperator(
        task_id="publish_report",
        workflow=SUPPLIER_EXCEPTIONS,
        templates=["supplier_report.md.j2", "supplier_report.html.j2"],  # next to the DAG file
        title="Supplier exceptions, run {{ run_id }}",
        recipients=["procurement@example.com"],
        required_fields=["ai_result.draft"],
    )

The output is what the templates (Jinja2, see :mod:`conveyor.effects.templates`) or a ``render``
callable make of the items; Conveyor adds only the guarantees around it:

* **never blank**: no items, an item with an empty required field, or an output that renders to
  nothing fails the task once (no retry), and nothing is published;
* **one item cannot sink the run**: an item the templates cannot render (a template error only
  it causes, alone or beside the others) goes to a person (``pending_review``, with the error)
  and the rest is published; a template error no item is found to cause fails the task once;
* **once**: the publication is an outbox record in the ledger (effect ``publish_report`` of the
  run); once it is done, a retry or a clear publishes nothing again and only moves the items that
  publication contained;
* **shared storage**: the files go to object storage (``[conveyor] storage_base``), so the task can
  run on any worker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException

from conveyor.errors import EffectError
from conveyor.ledger_step import LedgerStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from conveyor.ledger.records import Item
    from conveyor.ledger.reviewed import ReviewDecision
    from conveyor.workflow import Workflow

#: The ledger effect (outbox) of a publication.
EFFECT = "publish_report"

Renderer = Callable[[Mapping[str, Any]], Mapping[str, str]]


def item_record(item: Item, decision: ReviewDecision | None = None) -> dict[str, Any]:
    """What a template sees of one item.

    ``ai_result`` is the answer published: the model's, or the model's with a person's corrections
    merged in. ``reviewed_by`` names the person who last decided on the item (None: nobody did,
    the model's answer passed its checks); ``corrected`` lists the fields they changed
    (``{"field", "before", "after"}``; empty when they approved it as it was); ``model_answer`` is
    the model's own answer when a person corrected it (else None).
    """
    return {
        "item_id": item.item_id,
        "business_key": item.business_key,
        "run_id": item.run_id,
        "payload": item.payload,
        "ai_result": item.ai_result,
        "confidence": item.confidence,
        "reason": item.reason,
        "reviewed_by": decision.reviewer if decision else None,
        "corrected": decision.changes if decision else [],
        "model_answer": decision.model_answer if decision else None,
    }


class UnrenderableItems(EffectError, AirflowFailException):
    """The publication cannot be rendered with these items (a template error no retry can fix).

    :param errors: item id -> the error rendering it raised (empty: no single item was found).
    :param cause: the error rendering the whole publication raised.
    """

    def __init__(self, errors: Mapping[str, str], cause: BaseException) -> None:
        named = "; ".join(f"{i}: {e}" for i, e in list(errors.items())[:5]) or "no single item was found to blame"
        super().__init__(f"the publication cannot be rendered ({type(cause).__name__}: {cause}); items: {named}")
        self.errors = dict(errors)


def outbox_key(workflow: str, run_id: str) -> str:
    return f"{workflow}:report:{run_id}"


class PublishOperator(LedgerStepOperator):
    """Publish the run's items in ``from_status`` as one publication and move them to ``to_status``.

    :param workflow: the workflow's :class:`~conveyor.workflow.Workflow` (or its stored name).
    :param templates: Jinja2 template files, one per output file (``report.md.j2`` writes
        ``report.md``); relative paths next to the DAG file, then in the include folder (and its
        ``templates/``).
    :param render: instead of templates: a callable of the template context returning
        ``{file name: text}``.
    :param title: the publication's title (templated).
    :param recipients: who it goes to (recorded in the outbox; the delivery is yours to add).
    :param required_fields: item fields (``ai_result.draft``, ``payload.amount``) that must not be
        empty in any item: one empty one and nothing is published.
    :param output_folder: an object-storage URL (templated); default
        ``<storage_base>/reports/<workflow>/<run id>``.
    :param from_status: the status of the items to publish (default ``approved``).
    :param to_status: the status published items move to (default ``published``).
    :return: (XCom) the files written (URLs), the number of items and who it went to.
    """

    template_fields: Sequence[str] = ("title", "output_folder")
    ui_color = "#d5f5e3"

    def __init__(
        self,
        *,
        templates: Sequence[str] = (),
        render: Renderer | None = None,
        title: str = "{{ dag.dag_id }} {{ run_id }}",
        recipients: Sequence[str] = (),
        required_fields: Sequence[str] = (),
        output_folder: str | None = None,
        from_status: str = "approved",
        to_status: str = "published",
        workflow: str | Workflow,
        **kwargs: Any,
    ) -> None:
        super().__init__(workflow=workflow, **kwargs)
        if bool(templates) == (render is not None):
            raise ValueError("PublishOperator takes templates=[...] or render=..., exactly one")
        self.templates = list(templates)
        self.render = render
        self.title = title
        self.recipients = list(recipients)
        self.required_fields = list(required_fields)
        self.output_folder = output_folder
        self.from_status = from_status
        self.to_status = to_status

    def execute(self, context: Context) -> dict[str, Any]:
        from conveyor.ledger.actors import task_actor

        ledger = self.ledger(context)
        run_id = context["run_id"]
        actor = task_actor(context)
        key = outbox_key(self.workflow, run_id)
        done = ledger.effects(EFFECT, [key]).get(key)
        if done and done["state"] == "done":
            result = done["result"]
            self.log.info("Run %s was already published (%s); not publishing again.", run_id, result["files"])
        else:
            from conveyor.include import dag_file_folder, searching_near

            items = ledger.items(workflow=self.workflow, run_id=run_id, status=self.from_status, limit=None)
            with searching_near(dag_file_folder(context)):
                try:
                    outputs = self._compose(items, context, ledger)
                except UnrenderableItems as exc:
                    if not exc.errors:
                        raise
                    # One item cannot sink the run: it goes to a person with the reason, the rest
                    # is published (a second failure fails the task once, naming it).
                    self._park(ledger, exc.errors, actor)
                    items = [i for i in items if i.item_id not in exc.errors]
                    outputs = self._compose(items, context, ledger)
            ledger.claim_effects(EFFECT, [key], actor=actor)
            result = self._write(outputs, items, context)
            ledger.complete_effects(EFFECT, {key: result})
            self.log.info("Published %d item(s) as %s for %s.", len(result["items"]), ", ".join(result["files"]),
                          ", ".join(self.recipients) or "no recipients named")
        moved = ledger.transition(
            self.workflow, result["items"], to_status=self.to_status, from_status=self.from_status,
            actor=actor, reason=f"published in {result['files'][0].rsplit('/', 1)[-1]}", atomic=False,
        )
        late = ledger.item_ids(workflow=self.workflow, run_id=run_id, status=self.from_status)
        if late:
            self.log.warning("%d item(s) reached %s after the publication; they wait for the next one: %s",
                             len(late), self.from_status, ", ".join(late[:5]))
        return {"files": result["files"], "items": len(result["items"]), "moved_now": len(moved.moved),
                "recipients": self.recipients}

    # -- content -----------------------------------------------------------------------------

    def preview(self, context: Context, *, status: str) -> dict[str, str]:
        """What this step would publish if the run's items in ``status`` were approved now
        (``{file name: text}``), rendered with this step's templates and title, writing nothing.

        :raises AirflowFailException: nothing to publish, or an item with an empty required field.
        """
        import copy

        from conveyor.include import dag_file_folder, searching_near

        step = copy.copy(self)
        for name in self.template_fields:
            setattr(step, name, self.render_template(getattr(self, name), context))
        ledger = self.ledger(context)
        items = ledger.items(workflow=self.workflow, run_id=context["run_id"], status=status, limit=None)
        with searching_near(dag_file_folder(context)):
            return step._compose(items, context, ledger)


    def template_context(
        self, items: Sequence[Item], context: Context, decisions: Mapping[str, ReviewDecision] | None = None
    ) -> dict[str, Any]:
        """What the templates see: ``items`` (see :func:`item_record`, by business key), ``count``
        (how many items), ``title``, ``workflow``, ``run_id`` and ``run_after`` (ISO text).

        :param decisions: item id -> a person's last decision on it (``Ledger.review_decisions``).
        """
        dag_run = context.get("dag_run")
        run_after = getattr(dag_run, "run_after", None)
        decided = decisions or {}
        records = [item_record(i, decided.get(i.item_id)) for i in sorted(items, key=lambda i: i.business_key)]
        return {
            "items": records,
            "count": len(records),
            "title": self.title,
            "workflow": self.workflow,
            "run_id": context["run_id"],
            "run_after": run_after.isoformat() if run_after else None,
        }

    def _compose(self, items: Sequence[Item], context: Context, ledger: Any) -> dict[str, str]:
        from conveyor.fields import dig

        def refuse(why: str) -> AirflowFailException:
            counts = ledger.count_by_status(workflow=self.workflow, run_id=context["run_id"])
            return AirflowFailException(f"{why}: a blank publication is never published. Items of this run by "
                                        f"status: {counts or 'none'}")

        if not items:
            raise refuse(f"run {context['run_id']!r} has no items in {self.from_status!r}")
        for path in self.required_fields:
            empty = [i.item_id for i in items if not str(dig(item_record(i), path) or "").strip()]
            if empty:
                raise refuse(f"{len(empty)} item(s) have an empty {path}, e.g. {', '.join(empty[:3])}")
        decisions = ledger.review_decisions(self.workflow, context["run_id"])
        try:
            outputs = self._render_items(items, context, decisions)
        except AirflowFailException:
            raise
        except Exception as exc:  # a template error is deterministic: never retried
            raise UnrenderableItems(self._culprits(items, context, decisions), exc) from exc
        blank = [name for name, text in outputs.items() if not str(text).strip()]
        if not outputs or blank:
            raise refuse(f"the output {', '.join(blank) or '(none)'} rendered empty")
        return outputs

    def _render_items(
        self, items: Sequence[Item], context: Context, decisions: Mapping[str, ReviewDecision] | None = None
    ) -> dict[str, str]:
        values = self.template_context(items, context, decisions)
        return dict(self.render(values)) if self.render is not None else self._from_templates(values)

    def _culprits(
        self,
        items: Sequence[Item],
        context: Context,
        decisions: Mapping[str, ReviewDecision] | None = None,
        limit: int = 5_000,
    ) -> dict[str, str]:
        """Item id -> error, for the items the publication cannot be rendered with.

        Each item rendered alone finds what breaks on its own; each item rendered with one that
        renders finds what breaks beside the others (a ``None`` among text a template sorts or
        groups); failing that (up to 300 items), the items without which the rest renders. Only on
        the failure path, over at most ``limit`` items.
        """
        if len(items) > limit:
            return {}

        def error_of(group: Sequence[Item]) -> str | None:
            try:
                self._render_items(group, context, decisions)
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}"
            return None

        found = {i.item_id: e for i in items if (e := error_of([i])) is not None}
        if len(found) == len(items):
            return {}  # every item fails alone: the template is at fault, not an item
        fine = [i for i in items if i.item_id not in found]
        if len(fine) >= 2:
            reference = fine[0]
            beside = {i.item_id: e for i in fine[1:] if (e := error_of([reference, i])) is not None}
            if beside and len(beside) == len(fine) - 1 and len(fine) > 2:
                found[reference.item_id] = next(iter(beside.values()))  # the odd one is the reference
            else:
                found.update(beside)
        if not found and len(items) <= 300:
            # Breaks only beside some others: the one item without which everything renders (two
            # or more such items are a pair that cannot go together: nobody can tell which is wrong).
            alone = [i for i in items if error_of([j for j in items if j is not i]) is None]
            if len(alone) == 1:
                found[alone[0].item_id] = error_of(items) or "cannot be rendered beside the others"
        return found

    def _park(self, ledger: Any, errors: Mapping[str, str], actor: str) -> None:
        """Send the items the publication cannot be rendered with to a person, with the reason."""
        from conveyor.ledger.statuses import Status
        from conveyor.ledger.store import ItemUpdate

        updates = {
            item_id: ItemUpdate(reason=f"{self.task_id} cannot render it: {error}"[:500], last_error=error,
                                review_target=self.from_status,
                                detail={"unrenderable": self.task_id, "error": error[:500]})
            for item_id, error in errors.items()
        }  # fmt: skip
        ledger.transition(self.workflow, updates, to_status=Status.PENDING_REVIEW, from_status=self.from_status,
                          actor=actor)  # fmt: skip
        self.log.warning("%d item(s) cannot be rendered; sent to review, the rest is published: %s",
                         len(errors), "; ".join(f"{i}: {e}" for i, e in list(errors.items())[:5]))

    def _from_templates(self, values: Mapping[str, Any]) -> dict[str, str]:
        from conveyor.effects.templates import output_name, render_file
        from conveyor.include import resolve

        try:
            paths = [resolve(t, "templates") for t in self.templates]
        except FileNotFoundError as exc:
            raise AirflowFailException(f"publication template missing: {exc}") from None
        return {output_name(p): render_file(p, values) for p in paths}

    def _write(self, outputs: Mapping[str, str], items: Sequence[Item], context: Context) -> dict[str, Any]:
        from conveyor import storage
        from conveyor.templated import or_none

        given = or_none(self.output_folder)
        folder = storage.as_path(given) if given else storage.under("reports", self.workflow, context["run_id"])
        files, digests = [], {}
        for name, text in outputs.items():
            target = folder / storage.safe_name(name)
            digests[str(target)] = storage.write_text(target, text)
            files.append(str(target))
        return {
            "files": files,
            "sha256": digests,
            "title": self.title,
            "recipients": self.recipients,
            "items": sorted(i.item_id for i in items),
        }
