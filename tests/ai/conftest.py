"""Fixtures of the AI step's tests: the OpenAI-compatible server on 127.0.0.1 and its connections."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from tests.ai.llm_server import LLMServer

PRIMARY_CONN = "llm_test"
BACKUP_CONN = "llm_backup"


@pytest.fixture(scope="session")
def llm_server_process() -> Iterator[LLMServer]:
    server = LLMServer()
    yield server
    server.stop()


@pytest.fixture
def llm(llm_server_process: LLMServer, monkeypatch: pytest.MonkeyPatch) -> LLMServer:
    """The server, reset, with two ``pydanticai`` connections to it (two endpoints, two breakers)."""
    llm_server_process.configure(reset=True)
    for conn_id, model in ((PRIMARY_CONN, "fake-model"), (BACKUP_CONN, "backup-model")):
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{conn_id.upper()}",
            json.dumps(
                {
                    "conn_type": "pydanticai",
                    "host": llm_server_process.base_url,
                    "password": "sk-test-key-123",
                    "extra": {"model": f"openai-chat:{model}"},
                }
            ),
        )
    return llm_server_process


@pytest.fixture(autouse=True)
def _quiet_http_logs() -> None:
    import logging

    for name in ("httpx", "httpx2", "openai"):
        logging.getLogger(name).setLevel(logging.WARNING)


os.environ.setdefault("OPENAI_API_KEY", "sk-unused")
