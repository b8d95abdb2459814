"""The ledger is the one door to its tables: no SQL on them outside ``src/conveyor/ledger/``.

The tables are read off the migrations, so a new table is covered the day it is created. A
string literal (docstrings aside) that names ``conveyor.<table>`` beside an SQL keyword counts.
``NOT_YET`` lists the modules whose statements have not moved yet (issue 30); it may only shrink
(empty since issue 30 was done: a module with such SQL fails the first test, and belongs in the ledger).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.source_graph import SRC, modules, string_literals

LEDGER = SRC / "conveyor" / "ledger"

NOT_YET: set[str] = set()

_SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|FROM|JOIN|INTO|TRUNCATE|ALTER|NOTIFY)\b")


def ledger_tables() -> set[str]:
    created = re.compile(r"CREATE\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?conveyor\.([a-z_]+)", re.I)
    return {
        name for migration in (LEDGER / "migrations").glob("*.sql") for name in created.findall(migration.read_text())
    }


def sql_on_ledger_tables(path: Path, tables: set[str]) -> list[str]:
    named = re.compile(r"\bconveyor\.(" + "|".join(sorted(tables)) + r")\b")
    return [
        f"{path.relative_to(SRC)}:{line}: {text.strip().splitlines()[0][:90]}"
        for line, text in string_literals(path)
        if _SQL.search(text) and named.search(text)
    ]


def offenders() -> dict[str, list[str]]:
    tables = ledger_tables()
    found = {}
    for module, path in modules().items():
        if LEDGER in path.parents:
            continue
        lines = sql_on_ledger_tables(path, tables)
        if lines:
            found[module] = lines
    return found


def test_tables_are_read_off_the_migrations() -> None:
    assert {"items", "transitions", "batches", "effects", "ai_breakers", "review_claims"} <= ledger_tables()


def test_no_sql_on_the_ledgers_tables_outside_the_ledger() -> None:
    new = {module: lines for module, lines in offenders().items() if module not in NOT_YET}
    listing = "\n".join(line for lines in new.values() for line in lines)
    assert not new, f"SQL on the ledger's tables outside src/conveyor/ledger/ (add a typed function there):\n{listing}"


def test_not_yet_only_shrinks() -> None:
    moved = NOT_YET - set(offenders())
    assert not moved, f"no SQL left in {sorted(moved)}: take them off NOT_YET"


def test_the_check_sees_sql_and_not_prose(tmp_path: Path) -> None:
    sample = SRC / "conveyor" / "_sample_for_test.py"
    try:
        sample.write_text(
            '"""Reads conveyor.items FROM the ledger (a docstring: prose)."""\n'
            'MESSAGE = "see conveyor.items for the rows"\n'
            'QUERY = ("SELECT item_id "\n         "FROM conveyor.items WHERE run_id = %s")\n'
        )
        found = sql_on_ledger_tables(sample, ledger_tables())
    finally:
        sample.unlink()
    assert len(found) == 1 and ":3: SELECT item_id FROM conveyor.items" in found[0]
