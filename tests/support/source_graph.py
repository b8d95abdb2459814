"""The package's own source read as data: its modules, the imports between them, its string literals.

Read with :mod:`ast`, never imported, so the checks built on it (import cycles, SQL outside the
ledger) cost no Airflow import and see every module, also those no test imports.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


@cache
def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module under ``src/``."""
    found: dict[str, Path] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _imported(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    known = modules()
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names if alias.name in known)
        return
    base = node.module or ""
    if node.level:
        package = module if known[module].name == "__init__.py" else module.rpartition(".")[0]
        parts = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    for alias in node.names:
        # `from conveyor.ledger import store` imports a module; `from conveyor.ledger import Ledger`
        # imports the package (whose lazy __getattr__ then imports the module on first use).
        full = f"{base}.{alias.name}"
        if full in known:
            yield full
        elif base in known:
            yield base


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """Module -> the package's modules it imports, at module level or inside a function.

    Imports under ``if TYPE_CHECKING:`` are left out: they never run. Imports inside functions are
    kept: a cycle hidden in a function still ties the two modules into one piece that cannot be
    understood, tested or moved apart (it is how the cycles issue 30 names were found).
    """
    graph: dict[str, frozenset[str]] = {}
    for module, path in modules().items():
        targets: set[str] = set()
        for node in ast.walk(_without_type_checking(ast.parse(path.read_text(), str(path)))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                targets.update(_imported(module, node))
        targets.discard(module)
        graph[module] = frozenset(targets)
    return graph


def _without_type_checking(tree: ast.Module) -> ast.Module:
    class Strip(ast.NodeTransformer):
        def visit_If(self, node: ast.If) -> object:
            if _is_type_checking(node):
                return node.orelse or ast.Pass()
            return self.generic_visit(node)

    stripped: ast.Module = Strip().visit(tree)
    return stripped


def cycles(graph: dict[str, frozenset[str]]) -> list[tuple[str, ...]]:
    """The strongly connected pieces of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                piece = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    piece.append(member)
                    if member == node:
                        break
                if len(piece) > 1:
                    found.append(tuple(sorted(piece)))
    return sorted(found)


def _docstring_nodes(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def string_literals(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every string literal in a module but its docstrings (f-strings' constant parts too)."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = _docstring_nodes(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value
