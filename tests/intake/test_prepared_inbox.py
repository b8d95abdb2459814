"""A fresh deployment's inboxes (``conveyor.deploy.inboxes``, airflow-init's step): created where the
settings file says, found by the intake as an empty inbox (a quiet hour, not a failure), idempotent."""

from __future__ import annotations

from pathlib import Path

import pytest

from conveyor.deploy.inboxes import main, prepare_inboxes
from conveyor.intake.operators import inbox_files, location

SETTINGS = """\
airflow:
  variables:
    - variable_name: shop_inbox
      variable_value: ${SHOP_INBOX:-inbox/shop}
"""


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("SHOP_INBOX", raising=False)
    path = tmp_path / "airflow_settings.yaml"
    path.write_text(SETTINGS)
    return path


def test_the_inbox_is_made_where_the_file_says_and_read_as_empty(place, settings):  # type: ignore[no-untyped-def]
    with pytest.raises(Exception, match="does not exist"):
        inbox_files(location("inbox/shop", "inbox"))

    lines = prepare_inboxes(settings, ["shop_inbox"])

    assert lines == [f"inbox ready: {location('inbox/shop', 'inbox')} (Variable shop_inbox)"]
    assert inbox_files(location("inbox/shop", "inbox")) == []


def test_preparing_again_leaves_the_inbox_and_its_documents(place, settings):  # type: ignore[no-untyped-def]
    prepare_inboxes(settings, ["shop_inbox"])
    place.put("inbox/shop/INV-1.json", b'{"invoice": 1}')

    prepare_inboxes(settings, ["shop_inbox"])

    assert [p.name for p in inbox_files(location("inbox/shop", "inbox"))] == ["INV-1.json"]


def test_the_environment_moves_the_inbox_as_it_moves_the_variable(place, settings, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SHOP_INBOX", "elsewhere/shop")

    prepare_inboxes(settings, ["shop_inbox"])

    assert inbox_files(location("elsewhere/shop", "inbox")) == []


def test_a_name_that_is_no_variable_is_refused_naming_the_known_ones(settings, capsys):  # type: ignore[no-untyped-def]
    assert main([str(settings), "shop_inbx"]) == 1
    assert "no variable 'shop_inbx' names an inbox (variables: shop_inbox)" in capsys.readouterr().err
