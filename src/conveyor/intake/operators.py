"""Operators that bring a workflow's input in, through object storage (see :mod:`conveyor.storage`).

* :class:`SnapshotExtractOperator` copies an upstream extract into a run-scoped landing folder,
  so a retried gate validates exactly the file the run started with, on whichever worker.
* :class:`InboxIntakeOperator` takes every new document out of an inbox folder into the run's
  landing folder, as ``received`` ledger items, in one set-based write.

A relative ``source``/``inbox`` is taken under ``[conveyor] storage_base``; deployments usually
point it at a Variable (see ``airflow_settings.yaml``), so scheduled runs need no conf.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from conveyor.errors import IntakeError
from conveyor.ledger_step import LedgerStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context, ObjectStoragePath

    from conveyor.ledger import Ledger


def location(value: str, what: str) -> ObjectStoragePath:
    """An object-storage path from a URL, an absolute local path, or a path under the storage base."""
    from conveyor import storage
    from conveyor.templated import or_none

    text = str(or_none(value) or "").strip()
    if not text:
        raise AirflowFailException(f"no {what} given: set the DAG param or the Variable it reads")
    if "://" in text or text.startswith(("/", "~")):
        return storage.as_path(text)
    return storage.root() / text


#: Left in an inbox on object storage that the intake emptied: there a folder exists only while
#: something is in it, and a missing inbox must fail, not pass for a quiet hour.
INBOX_MARKER = ".conveyor-inbox"


def inbox_files(inbox: ObjectStoragePath) -> list[ObjectStoragePath]:
    """The files directly in ``inbox`` (by name), its marker aside.

    :raises AirflowFailException: the inbox does not exist, is not a folder, or cannot be read;
        the message names the location and the cause.
    :raises SourceUnreachable: listing it failed otherwise (a network or credentials problem):
        retried like any task error.
    """
    from conveyor import storage

    try:
        if storage.is_local(inbox):
            # fsspec's local exists() says False for a folder it may not read: ask the OS itself.
            folder = storage.local_path(inbox)
            exists, is_dir = folder.exists(), folder.is_dir()
            names = sorted(p.name for p in folder.iterdir() if p.is_file()) if is_dir else []
            entries = [inbox / name for name in names]
        else:
            exists = inbox.exists()
            is_dir = exists and inbox.is_dir()
            entries = sorted((p for p in inbox.iterdir() if p.is_file()), key=lambda p: p.name) if is_dir else []
    except PermissionError as exc:
        raise AirflowFailException(f"inbox {inbox} cannot be read: {exc.strerror or exc}") from None
    except (FileNotFoundError, NotADirectoryError):
        exists, is_dir, entries = False, False, []
    except Exception as exc:  # an object store that does not answer, refused credentials...
        raise SourceUnreachable(f"inbox {inbox} cannot be listed: {type(exc).__name__}: {exc}") from exc
    if not exists:
        hint = "" if storage.is_local(inbox) else (
            f" (on object storage: no object under that prefix; an empty inbox holds a {INBOX_MARKER!r} marker)")
        raise AirflowFailException(
            f"inbox {inbox} does not exist{hint}: a renamed folder, a failed mount or a wrong path? "
            "A missing inbox is not a quiet hour; nothing was taken in"
        )
    if not is_dir:
        raise AirflowFailException(f"inbox {inbox} is a file, not a folder: nothing was taken in")
    return [p for p in entries if p.name != INBOX_MARKER]


def keep_inbox(inbox: ObjectStoragePath) -> None:
    """Leave the marker in an inbox on object storage, so emptying it does not make it vanish."""
    from conveyor import storage

    if not storage.is_local(inbox) and not (inbox / INBOX_MARKER).exists():
        storage.write_text(inbox / INBOX_MARKER, "an inbox of Conveyor: keeps this folder on object storage\n")


class SourceUnreachable(IntakeError, RuntimeError):
    """A feed file or an inbox that could not be read for a reason a retry may fix (the network,
    the object store, credentials): retried like any task error, then failed naming it."""


def landing(workflow: str, run_id: str) -> ObjectStoragePath:
    from conveyor import storage

    return storage.under("landing", workflow, run_id)


class SnapshotExtractOperator(LedgerStepOperator):
    """Copy the extract at ``source`` into ``<storage_base>/landing/<workflow>/<run>/``.

    A missing file fails at once and without retries: nothing downstream runs on nothing. An
    empty (0-byte) file is snapshotted like any other, so the gate rejects it and records the
    delivery (``conveyor batches``) instead of it leaving no trace. A re-run of the same run keeps
    the first snapshot, unless the gate rejected it: then the feed was fixed (the recovery of a
    rejected batch is "fix the feed, clear the run") and the file is taken again.

    :param workflow: the workflow (names the landing folder).
    :param source: the upstream file (templated): a URL, an absolute path, or a path under the
        storage base, e.g. ``{{ params.extract_path or var.value.get('my_extract') }}``.
    :return: the snapshot's URL (XCom), for the gate.
    """

    template_fields: Sequence[str] = ("source",)

    def __init__(self, *, source: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source = source

    def execute(self, context: Context) -> str:
        from conveyor import storage

        source = location(self.source, "extract location")
        try:
            found = source.is_file()
            size = source.stat().st_size if found else 0
        except PermissionError as exc:
            raise AirflowFailException(f"extract {source} cannot be read: {exc.strerror or exc}") from None
        except Exception as exc:  # an object store that does not answer, refused credentials...
            raise SourceUnreachable(f"extract {source} cannot be reached: {type(exc).__name__}: {exc}") from exc
        if not found:
            raise AirflowFailException(f"extract not found: {source} (the feed delivered no file there)")
        if size == 0:
            self.log.warning("Extract %s is empty (0 bytes); the gate will reject and record it.", source)
        target = landing(self.workflow, context["run_id"]) / source.name
        rejected = self.ledger(context).rejected_batches(self.workflow, context["run_id"]) if target.exists() else []
        if target.exists() and not rejected:
            self.log.info("Snapshot %s already taken for this run; keeping it.", target)
        elif rejected:
            # The recovery of a rejected feed is "fix the feed, clear the run": the snapshot the
            # gate refused is replaced by what the feed holds now (the gate checks it again).
            storage.copy(source, target)
            self.log.warning(
                "The gate rejected this run's snapshot (%s); the feed at %s is taken again into %s.",
                "; ".join(f"{b['step']}: {b['reason']}" for b in rejected), source, target,
            )
        else:
            storage.copy(source, target)
            self.log.info("Snapshot of %s taken at %s.", source, target)
        return str(target)


class InboxIntakeOperator(LedgerStepOperator):
    """Take each new document of ``inbox_path`` in as a ``received`` item of ``workflow``.

    The business key is the file name without its extension. Each file is copied to the run's
    landing folder (its item points there) and then removed from the inbox, so the inbox only ever
    holds what no run has taken yet. Every file is accounted for:

    * an inbox that exists, can be read and is empty is a quiet hour: the task is skipped (a feed
      that stays silent is what ``workflow_health``'s throughput alert is for); an inbox that
      does not exist, cannot be read or cannot be reached fails the task naming the location and
      the cause (a renamed share or a failed mount is not a quiet hour);
    * a document another run already took in with the same content is moved aside to
      ``<inbox>/duplicates/<run>/``, with a log line naming that run, and is not processed again;
    * a document whose name was taken in before with other content becomes an item of its own
      (``<name>~<hash>``), quarantined for a person with the earlier item named;
    * a file of a type not in ``extensions``, a document over ``max_bytes``, and a document whose
      text cannot be had (a scanned PDF, a text file that is not UTF-8, an empty file) become
      items quarantined for a person with the reason, never files left behind in silence.

    On object storage a folder exists only while something is in it: the intake leaves a
    ``.conveyor-inbox`` marker in an inbox it emptied, so the next hour finds it (create one to
    declare a new, empty inbox).

    :param workflow: the workflow the documents enter.
    :param inbox_path: the folder (templated): a URL, an absolute path, or a path under the storage base.
    :param extensions: file endings the next step reads (PDFs are read through their text layer).
    :param max_bytes: larger documents go to a person instead of the model.
    """

    template_fields: Sequence[str] = ("inbox_path",)

    def __init__(
        self,
        *,
        inbox_path: str,
        extensions: Sequence[str] = (".txt", ".csv", ".json", ".pdf"),
        max_bytes: int = 1_000_000,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.inbox_path = inbox_path
        self.extensions = tuple(e.lower() for e in extensions)
        self.max_bytes = max_bytes

    def execute(self, context: Context) -> dict[str, Any]:
        inbox = location(self.inbox_path, "inbox folder")
        run_id = context["run_id"]
        ledger = self.ledger(context)
        found = inbox_files(inbox)
        if not found:
            taken = ledger.count_by_status(workflow=self.workflow, run_id=run_id)
            if taken:  # a cleared run whose documents its first attempt took in
                self.log.info("Inbox %s is empty; this run already took in %d document(s).", inbox, sum(taken.values()))
                return {"documents": 0, "received": 0, "already_taken": sum(taken.values())}
            raise AirflowSkipException(f"inbox {inbox} has no new documents: a quiet hour, nothing to process")
        return self._take_in(ledger, inbox, found, context)

    def _unreadable(self, path: ObjectStoragePath, target: ObjectStoragePath, size: int) -> str | None:
        """Why a person, not the next step, must handle this file; None when it can be read."""
        from conveyor import storage
        from conveyor.intake.documents import READABLE_FORMATS, UnreadableDocument, document_text

        fmt = path.suffix.lower()
        if fmt not in self.extensions:
            kind = f"a {fmt} file" if fmt else "a file without an extension"
            return (f"{path.name} is {kind}, not a document type this workflow reads "
                    f"({', '.join(self.extensions)}): a person must handle it")  # fmt: skip
        if size > self.max_bytes:
            return f"{path.name} is {size:,} bytes, over the {self.max_bytes:,} the step reads"
        if fmt[1:] in READABLE_FORMATS:
            try:
                document_text(storage.read_bytes(target), fmt, name=path.name)
            except UnreadableDocument as exc:
                return str(exc)
        return None

    def _take_in(
        self, ledger: Ledger, inbox: ObjectStoragePath, documents: list[ObjectStoragePath], context: Context
    ) -> dict[str, Any]:
        from conveyor import storage
        from conveyor.ledger import NewItem
        from conveyor.ledger.actors import task_actor
        from conveyor.ledger.statuses import Status
        from conveyor.ledger.store import ItemUpdate

        run_id, actor = context["run_id"], task_actor(context)
        folder = landing(self.workflow, run_id)
        items, by_key, unreadable = [], {}, {}
        for path in documents:
            size = path.stat().st_size
            target = folder / path.name
            if not target.exists():
                storage.copy(path, target)
            payload = {"path": str(target), "name": path.name, "format": path.suffix.lower()[1:], "bytes": size}
            why = self._unreadable(path, target, size)
            if why:
                unreadable[path.stem] = why
                self.log.warning("%s goes to a person: %s", path.name, why)
            # Keyed on the document's bytes, so a changed document is a conflict, not a no-op.
            items.append(NewItem(business_key=path.stem, payload=payload, input_hash=storage.sha256_of(target)))
            by_key[path.stem] = path
        result = ledger.receive(self.workflow, run_id, items, actor=actor, reason=f"taken from {inbox}")
        first = ledger.workflow(self.workflow).first
        held: dict[str, ItemUpdate] = {}
        for item_id, (other_run, status) in result.conflicts.items():
            key = item_id.split(":", 1)[1]
            new = next(i for i in items if i.business_key == key)
            variant = f"{key}~{new.hashed()[:8]}"
            ledger.receive(self.workflow, run_id, [NewItem(variant, new.payload, new.input_hash)], actor=actor)
            held[f"{self.workflow}:{variant}"] = ItemUpdate(
                reason=f"{by_key[key].name} reuses the name of {item_id} (run {other_run!r}, {status}) with other "
                "content: a new document or a changed copy? Approve to process it as a document of its own",
                review_target=first,
            )
        taken = set(result.inserted)
        for key, why in unreadable.items():
            if f"{self.workflow}:{key}" in taken:
                held[f"{self.workflow}:{key}"] = ItemUpdate(reason=why, last_error=why, review_target=first)
        if held:
            ledger.transition(self.workflow, held, to_status=Status.QUARANTINED, from_status=first, actor=actor)
        duplicates = self._set_aside(ledger, inbox, by_key, result.unchanged, run_id)
        for path in by_key.values():  # taken in (or set aside): the inbox no longer holds it
            if path.exists():
                path.unlink()
        keep_inbox(inbox)
        summary = {"documents": len(documents), "received": len(result.inserted), "duplicates": len(duplicates),
                   "held_for_review": len(held)}
        self.log.info("Inbox %s: %s", inbox, summary)
        if not result.inserted and not held and duplicates:
            raise AirflowSkipException(
                f"every document in {inbox} was taken in before ({len(duplicates)} set aside in duplicates/): "
                "nothing new to process"
            )
        return summary

    def _set_aside(
        self, ledger: Ledger, inbox: ObjectStoragePath, by_key: dict[str, ObjectStoragePath],
        unchanged: Sequence[str], run_id: str,
    ) -> list[str]:
        """Documents another run took in already (same content) go to ``duplicates/``, named in the log."""
        from conveyor import storage

        earlier = {i.item_id: i.run_id for i in ledger.items_by_id(unchanged)} if unchanged else {}
        moved = []
        for item_id in unchanged:
            first_run = earlier.get(item_id)
            if first_run == run_id:
                continue  # this run's own document, seen again by a retry
            path = by_key[item_id.split(":", 1)[1]]
            target = inbox / "duplicates" / storage.safe_name(run_id) / path.name
            storage.move(path, target)
            stray = landing(self.workflow, run_id) / path.name  # the copy this run made before it knew
            if stray.exists():
                stray.unlink()
            moved.append(item_id)
            self.log.warning("%s was already taken in by run %r (item %s); moved aside to %s.",
                             path.name, first_run, item_id, target)
        return moved
