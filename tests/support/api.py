"""The users of the test session's Airflow API server (simple auth manager)."""

from __future__ import annotations

#: name -> (simple-auth role, password)
USERS: dict[str, tuple[str, str]] = {
    "admin": ("admin", "admin-pass-1"),
    "rita": ("user", "rita-pass-1"),
    "victor": ("viewer", "victor-pass-1"),
}
