"""The stack's own share of the machine's services: two PostgreSQL databases, one Redis DB, an S3 API.

PostgreSQL and Redis are the machine's (as in CI); the stack only claims databases on them and
gives them back. The S3 API is a ``moto_server`` process the stack starts itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from psycopg.conninfo import conninfo_to_dict

from tests.support import postgres

if TYPE_CHECKING:
    from tests.support.own_postgres import OwnPostgres

REDIS_HOST = "127.0.0.1"
REDIS_PORT = 6379
# Redis DB 0 and 1 are what a local Airflow or Celery uses by default; the stack starts above them.
_FIRST_REDIS_DB = 2
_CLAIM_KEY = "conveyor-stack:owner"

S3_ACCESS_KEY = "test"
S3_SECRET_KEY = "test"
S3_REGION = "us-east-1"


@dataclass(frozen=True)
class Databases:
    """The stack's metadata DB (cloned from the migrated template) and its ledger DB.

    :param metadata: name of the Airflow metadata database.
    :param ledger: name of the ledger database.
    :param ledger_server: a PostgreSQL of the stack's own for the ledger (so a test can restart and
        crash it, as production meets it); None: the machine's server, like the metadata DB.
    """

    metadata: str
    ledger: str
    ledger_server: OwnPostgres | None = None

    @property
    def metadata_url(self) -> str:
        """SQLAlchemy URL of the metadata DB (``[database] sql_alchemy_conn``)."""
        return postgres.sqlalchemy_url_for(self.metadata)

    @property
    def ledger_dsn(self) -> str:
        """libpq URI of the ledger DB."""
        if self.ledger_server is not None:
            return self.ledger_server.dsn()
        return postgres.dsn_for(self.ledger)

    def ledger_settings_env(self) -> dict[str, str]:
        """The ``CONVEYOR_LEDGER_*`` variables airflow_settings.yaml reads, pointing at the ledger DB."""
        parts: dict[str, Any] = conninfo_to_dict(self.ledger_dsn)
        return {
            "CONVEYOR_LEDGER_HOST": str(parts.get("host") or "127.0.0.1"),
            "CONVEYOR_LEDGER_PORT": str(parts.get("port") or 5432),
            "CONVEYOR_LEDGER_DB": str(parts.get("dbname") or self.ledger),
            "CONVEYOR_LEDGER_USER": str(parts.get("user") or "postgres"),
            "CONVEYOR_LEDGER_PASSWORD": str(parts.get("password") or ""),
        }

    def create(self) -> None:
        """Clone the metadata DB from the template; create the ledger DB and run its migrations."""
        from conveyor.ledger import Ledger
        from tests.support.airflow_env import create_metadata_db

        create_metadata_db(self.metadata)
        if self.ledger_server is None:
            postgres.create_database(self.ledger)
        Ledger(self.ledger_dsn).upgrade()

    def drop(self) -> None:
        """Drop both databases (closing any connection left to them)."""
        postgres.drop_database(self.metadata)
        if self.ledger_server is not None:
            self.ledger_server.close()
        else:
            postgres.drop_database(self.ledger)


def claim_redis_db(owner: str, seed: int) -> int:
    """An empty Redis database index, claimed for ``owner`` (other sessions skip claimed ones).

    :param owner: written into the database so that a concurrent stack sees it is taken.
    :param seed: where to start looking (the pid, so that parallel sessions start apart).
    :raises RuntimeError: every index from 2 to 15 is in use.
    """
    import redis

    count = 16
    for step in range(count - _FIRST_REDIS_DB):
        index = _FIRST_REDIS_DB + (seed + step) % (count - _FIRST_REDIS_DB)
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=index)
        try:
            if _left_by_a_dead_session(client.get(_CLAIM_KEY)):
                client.flushdb()  # a killed test session never gave it back
            if client.dbsize() == 0 and client.set(_CLAIM_KEY, owner, nx=True):
                return index
        finally:
            client.close()
    raise RuntimeError(f"no free Redis database on {REDIS_HOST}:{REDIS_PORT} (2..15 all hold keys)")


def _left_by_a_dead_session(claim: bytes | None) -> bool:
    """Whether a claim (``stack-<pid>-<n>``) belongs to a process of this machine that is gone."""
    import psutil

    parts = (claim or b"").decode(errors="replace").split("-")
    return len(parts) == 3 and parts[0] == "stack" and parts[1].isdigit() and not psutil.pid_exists(int(parts[1]))


def release_redis_db(index: int) -> None:
    """Empty the claimed Redis database (Celery's queues and the claim)."""
    import redis

    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=index)
    try:
        client.flushdb()
    finally:
        client.close()


def redis_url(index: int) -> str:
    """The Celery broker URL of a Redis database."""
    return f"redis://{REDIS_HOST}:{REDIS_PORT}/{index}"


def s3_client(endpoint_url: str) -> Any:
    """A boto3 S3 client on the stack's S3 API."""
    import boto3

    return boto3.client(
        "s3", endpoint_url=endpoint_url, aws_access_key_id=S3_ACCESS_KEY,
        aws_secret_access_key=S3_SECRET_KEY, region_name=S3_REGION,
    )


def aws_connection(endpoint_url: str) -> dict[str, Any]:
    """The Airflow AWS connection (JSON form of ``AIRFLOW_CONN_<ID>``) for the S3 API on loopback."""
    return {
        "conn_type": "aws",
        "login": S3_ACCESS_KEY,
        "password": S3_SECRET_KEY,
        "extra": {"endpoint_url": endpoint_url, "region_name": S3_REGION},
    }
