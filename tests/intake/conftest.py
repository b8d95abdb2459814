"""A real S3 API on loopback (``moto_server``) and the two places a test's files can live.

``place`` is parametrised over ``file`` and ``s3``: the same test runs on a local folder and on a
bucket reached through an Airflow AWS connection, with ``[conveyor] storage_base`` pointed there,
as a deployment with Celery workers that share no disk has it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conveyor.quickstart.api_server import free_port

S3_CONN = "intake_s3"
BUCKET = "conveyor-intake"


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    def client(self):  # type: ignore[no-untyped-def]
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id="test",
                            aws_secret_access_key="test", region_name="us-east-1")  # fmt: skip


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    binary = Path(sys.executable).with_name("moto_server")
    with log.open("wb") as out:
        process = subprocess.Popen([str(binary), "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=out)
    server = S3Server(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                server.client().create_bucket(Bucket=BUCKET)
                break
            except Exception:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"moto_server did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.2)
        yield server
    finally:
        process.terminate()
        process.wait(timeout=10)


@dataclass(frozen=True)
class Place:
    """Where a test's files live: ``url(rel)`` is what a DAG param names, ``put``/``names`` reach it."""

    kind: str
    base: str  # the storage base URL (file:///... or s3://conn@bucket/prefix)
    root: Path | None = None
    server: S3Server | None = None
    prefix: str = ""

    def url(self, rel: str) -> str:
        return f"{self.base}/{rel}"

    def put(self, rel: str, data: bytes) -> None:
        if self.root is not None:
            target = self.root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        else:
            assert self.server is not None
            self.server.client().put_object(Bucket=BUCKET, Key=f"{self.prefix}/{rel}", Body=data)

    def names(self, rel: str) -> list[str]:
        """The files directly under folder ``rel``."""
        if self.root is not None:
            folder = self.root / rel
            return sorted(p.name for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
        assert self.server is not None
        listing = self.server.client().list_objects_v2(Bucket=BUCKET, Prefix=f"{self.prefix}/{rel}/", Delimiter="/")
        return sorted(o["Key"].rsplit("/", 1)[1] for o in listing.get("Contents", []))


@pytest.fixture(params=["file", "s3"])
def place(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Place:
    if request.param == "file":
        root = tmp_path / "storé (base) #1"
        root.mkdir()
        base = "file://" + str(root)
        monkeypatch.setenv("AIRFLOW__CONVEYOR__STORAGE_BASE", base)
        return Place("file", base, root=root)
    server: S3Server = request.getfixturevalue("s3_server")
    monkeypatch.setenv(f"AIRFLOW_CONN_{S3_CONN.upper()}", json.dumps({
        "conn_type": "aws", "login": "test", "password": "test",
        "extra": {"endpoint_url": server.endpoint, "region_name": "us-east-1"},
    }))  # fmt: skip
    prefix = f"t-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("AIRFLOW__CONVEYOR__STORAGE_BASE", f"s3://{BUCKET}/{prefix}")
    monkeypatch.setenv("AIRFLOW__CONVEYOR__STORAGE_CONN_ID", S3_CONN)
    return Place("s3", f"s3://{S3_CONN}@{BUCKET}/{prefix}", server=server, prefix=prefix)


@pytest.fixture
def alerts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    path = tmp_path / "alerts.jsonl"
    monkeypatch.setenv("CONVEYOR_TEST_ALERTS", str(path))

    def read() -> list[dict]:
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    return read


