"""A local mailbox for the demo: alerts go to a real SMTP server on 127.0.0.1 and land as files.

Alerts must reach a person, also in the quickstart: its runs send their alert e-mails (failed
steps, workflow_health findings) to this server, which keeps each message as an ``.eml`` file.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from email import message_from_bytes, policy
from pathlib import Path
from typing import Any


class _SaveToFolder:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.counter = itertools.count(len(list(folder.glob("*.eml"))) + 1)
        self.subjects: list[str] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd hook
        raw = envelope.original_content or envelope.content
        (self.folder / f"{next(self.counter):04d}.eml").write_bytes(raw)
        self.subjects.append(str(message_from_bytes(raw, policy=policy.default)["Subject"]))
        return "250 Message accepted for delivery"


@contextmanager
def local_mailbox(folder: Path) -> Iterator[tuple[int, list[str]]]:
    """An SMTP server on a free port of 127.0.0.1 saving mail into ``folder``.

    :return: (port, the subjects received so far — a live list).
    """
    from aiosmtpd.controller import Controller

    from conveyor.quickstart.api_server import free_port

    folder.mkdir(parents=True, exist_ok=True)
    handler = _SaveToFolder(folder)
    port = free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port, handler.subjects
    finally:
        controller.stop()
