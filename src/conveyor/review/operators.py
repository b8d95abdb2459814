"""``SignOffOperator``: one person signs a run's output off, and a refusal stops the run visibly.

It is Airflow's human-in-the-loop approval (the standard provider's ``HITLOperator``: the prompt
shows in the Airflow UI and the REST API, the task waits in ``awaiting_input`` holding no worker
slot) with what a sign-off needs to mean something:

* **the prompt says what is signed off**: the run's items by status, how many the sign-off
  approves, and a link to a preview of the report itself: the ``preview=`` publish step's own
  rendering of the items waiting for the sign-off (every output file, e.g. ``.md`` and ``.html``),
  published nowhere, stored in the ledger for this run and task (:mod:`conveyor.review.previews`;
  a retry or clear replaces it) and served by the Conveyor app behind Airflow's login, at a link
  under ``[api] base_url`` so it opens from the Airflow UI's Required Actions view; the body keeps
  the counts and the first lines of the Markdown rendering;
* **Reject fails the run**: the task fails (no retry) with who rejected and why (the optional
  ``reason`` the person enters) in the error, so nothing downstream is approved or published, the
  run is red, and the task's failure callback tells a person (``alert_on_failure``, Conveyor's
  alert path, unless the task has a failure callback of its own); the items stay where they are;
* **Approve** lets the run go on; the response (who, when, reason) is the task's XCom.

::

    SignOffOperator(
        task_id="director_signoff",
        workflow=SUPPLIER_EXCEPTIONS,
        status="ai_processed",            # the items the sign-off approves
        preview="publish_report",         # a PublishOperator of the DAG
        subject="Supplier exception report of {{ dag_run.run_after | ds }}: approve for procurement?",
        response_timeout=timedelta(hours=1),
    )
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.hitl import HITLOperator

from conveyor.errors import ReviewError

if TYPE_CHECKING:
    from airflow.sdk import Context

    from conveyor.review.previews import Preview
    from conveyor.workflow import Workflow

APPROVE = "Approve"
REJECT = "Reject"
#: The prompt's body shows at most this many lines / characters of the Markdown preview; the whole
#: report (every file) is on the preview page it links to.
EXCERPT_LINES = 12
EXCERPT_CHARS = 1_500


def _base_url() -> str:
    """Airflow's ``[api] base_url`` (empty when unset: the link is then relative to the UI's server)."""
    try:
        from airflow.sdk.configuration import conf
    except ImportError:  # pragma: no cover - older Task SDKs
        from airflow.configuration import conf
    return conf.get("api", "base_url", fallback="") or ""


class SignOffRejected(ReviewError):
    """A person refused the sign-off; the message says who and why."""


class SignOffOperator(HITLOperator):
    """Ask one person to sign a run's output off; Reject fails the run with who and why.

    :param workflow: the workflow (its :class:`~conveyor.workflow.Workflow` or name).
    :param subject: the prompt's headline (templated).
    :param body: what the person should check, above the summary and preview (templated).
    :param status: the status of the items the sign-off approves (counted in the prompt; the
        preview renders them).
    :param preview: the task id of a :class:`~conveyor.effects.publish.PublishOperator` of this DAG
        whose report is previewed: every output stored for this run and task, linked from the
        prompt, its Markdown's first lines quoted in it (None: no preview).
    :param response_timeout: how long to wait for the person (then the task fails: nobody signed).
    :param conn_id: the Airflow connection of the ledger (default ``[conveyor] ledger_conn_id``).
    :param kwargs: the rest of ``HITLOperator``'s arguments (``assigned_users``, ``notifiers``...).
    """

    template_fields: Sequence[str] = ("subject", "body")
    ui_color = "#e8daef"

    def __init__(
        self,
        *,
        workflow: str | Workflow,
        subject: str,
        body: str | None = None,
        status: str = "ai_processed",
        preview: str | None = None,
        conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        from airflow.sdk import Param
        from airflow.sdk.definitions.param import ParamsDict

        from conveyor import config
        from conveyor.ledger_step import workflow_parts
        from conveyor.monitoring.task_alerts import alert_on_failure

        for fixed in ("options", "multiple", "defaults"):
            if fixed in kwargs:
                raise ValueError(f"SignOffOperator decides its own {fixed!r}: Approve or Reject, one of them")
        kwargs.setdefault("on_failure_callback", alert_on_failure)
        kwargs.setdefault("retries", 0)  # a person's refusal is not retried
        given = kwargs.pop("params", None)  # the DAG's params come along; HITLOperator keeps task ones only
        params = given if isinstance(given, ParamsDict) else ParamsDict(given or {})
        params["reason"] = Param(
            None,
            type=["null", "string"],
            title="Reason",
            description="Why (recorded with the decision; named in the alert when you reject).",
            source="task",
        )
        super().__init__(subject=subject, body=body, options=[APPROVE, REJECT], multiple=False, params=params, **kwargs)
        self.workflow, self.declaration = workflow_parts(workflow)
        self.status = status
        self.preview = preview
        self.conn_id = conn_id or config.ledger_conn_id()

    def execute(self, context: Context) -> Any:
        self.body = self._prompt(context)
        return super().execute(context)

    # -- the prompt --------------------------------------------------------------------------

    def _prompt(self, context: Context) -> str:
        from conveyor.ledger_step import open_ledger

        ledger = open_ledger(self.conn_id, self.declaration, context)
        run_id = context["run_id"]
        counts = ledger.count_by_status(workflow=self.workflow, run_id=run_id)
        waiting = counts.get(self.status, 0)
        lines = [self.body.strip(), ""] if self.body and self.body.strip() else []
        lines.append(
            f"**What you sign off:** {waiting} item(s) of `{self.workflow}` run `{run_id}` in `{self.status}`."
        )
        others = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()) if s != self.status)
        if others:
            lines.append(f"Other items of the run: {others}.")
        lines.append(
            "Approve to let the run go on; Reject stops it (nothing is approved or published) and tells a person."
        )
        if self.preview:
            lines += ["", "---", "", *self._preview_lines(context, ledger, waiting)]
        return "\n".join(lines)

    def _preview_lines(self, context: Context, ledger: Any, items: int) -> list[str]:
        """Render the preview step's report, store all of it for the preview page, and return the
        prompt's lines about it: links to every stored file and a short excerpt."""
        from conveyor.effects.publish import PublishOperator
        from conveyor.ledger.actors import task_actor
        from conveyor.review.previews import Preview, SignOffPreviews

        store = SignOffPreviews(ledger)
        key = (self.workflow, context["run_id"], self.task_id)
        dag = getattr(context["ti"].task, "dag", None)
        if dag is None or not dag.has_task(self.preview):
            why = f"task {self.preview!r} is not in this DAG"
        elif not isinstance(step := dag.get_task(self.preview), PublishOperator):
            why = f"task {self.preview!r} is not a PublishOperator"
        else:
            try:
                outputs = step.preview(context, status=self.status)
            except Exception as exc:
                if not items:  # nothing to sign off (a re-run after the publication): say so, ask
                    why = str(exc)
                    store.discard([key])
                    return [f"**No preview:** {why}"]
                # What cannot be rendered cannot be approved: asking would let a person approve a
                # publication that then fails (the run red after the sign-off). Fail once, naming why.
                from airflow.sdk.exceptions import AirflowFailException

                store.discard([key])
                raise AirflowFailException(
                    f"the report of {self.workflow} run {context['run_id']} cannot be previewed, so it cannot be "
                    f"signed off: {exc}. Nothing was approved; fix or reject the items named, then clear this task"
                ) from exc
            else:
                preview = Preview(*key, source_task=step.task_id, files=outputs, items=items,
                                  rendered_by=task_actor(context))
                store.save([preview])
                return self._preview_summary(preview, _base_url())
        store.discard([key])  # an earlier try's preview must not stand for this one
        return [f"**No preview:** {why}"]

    def _preview_summary(self, preview: Preview, base_url: str) -> list[str]:
        """The prompt's lines about a stored preview: its links, counts and a short excerpt."""
        from conveyor.review.previews import preview_url

        links = " · ".join(
            f"[{name}]({preview_url(base_url, *preview.key, name)}) ({len(text):,} characters)"
            for name, text in preview.files.items()
        )
        main_url = preview_url(base_url, *preview.key, preview.main_file())
        lines = [
            f"**[Open the report preview]({main_url})** as `{self.preview}` will publish it: "
            f"{preview.items} item(s), {len(preview.files)} file(s): {links}.",
        ]
        name = next((n for n in preview.files if n.endswith((".md", ".txt"))), None)
        if name:
            text = preview.files[name].strip()
            excerpt = "\n".join(text.splitlines()[:EXCERPT_LINES])[:EXCERPT_CHARS]
            more = " (the rest on the preview page)" if len(excerpt) < len(text) else ""
            quoted = [f"> {line}".rstrip() for line in excerpt.splitlines()]  # set apart from the prompt
            lines += ["", f"Start of `{name}`{more}:", "", *quoted]
        return lines

    # -- the answer --------------------------------------------------------------------------

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        from airflow.sdk.exceptions import AirflowFailException

        answer = super().execute_complete(context=context, event=event)
        chosen = answer["chosen_options"][0]
        user = answer.get("responded_by_user") or {}
        who = (user.get("name") or user.get("id") or "someone") if isinstance(user, dict) else str(user)
        reason = ((answer.get("params_input") or {}).get("reason") or "").strip()
        self.hitl_summary_extra["approved"] = chosen == APPROVE
        if chosen == APPROVE:
            self.log.info("signed off by %s%s", who, f": {reason}" if reason else "")
            return answer
        message = (
            f"sign-off of {self.workflow} run {context['run_id']} rejected by {who}: "
            f"{reason or 'no reason given'}. Nothing was approved or published; the items stay in "
            f"{self.status!r} (fix what is wrong, then clear this task to ask again)"
        )
        self.log.error("%s", message)
        raise AirflowFailException(message) from SignOffRejected(message)
