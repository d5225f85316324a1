"""The import layering of docs/architecture.md, read from the page and checked against the source.

The page's block of ``package ──► imports`` lines is the one list of allowed edges: an
import between packages that the block does not name fails here, wherever it sits (top of
a module or inside a function). Neither the packages nor the modules of one package import
each other in a cycle, counting imports inside functions (and those for type checking). The
static reading stands in for importing every module, which would need torch, tensorrt and
matplotlib.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

import benchbox

PACKAGE = Path(benchbox.__file__).parent
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"
#: targets any package may import: the errors, atomic file writing, duration text, and the root package (for
#: ``__version__``)
ALWAYS_ALLOWED = {"errors", "fileio", "durations", "benchbox"}
#: modules outside the layering: the root's lazy public names, and ``python -m benchbox``
EXEMPT = {"benchbox", "__main__"}
#: third-party modules that must not load when a receipt is only read, compared or drawn
HEAVY = {"torch", "tensorrt", "tensorrt_rtx", "torch_tensorrt"}
#: what ``diff``, ``show``, ``plot``, ``export``, ``store`` and ``report`` load at import
TORCH_FREE = ("benchbox.receipts", "benchbox.render", "benchbox.store", "benchbox.report",
              "benchbox.plots", "benchbox.fallbacks", "benchbox.api")


def documented_edges(text: str) -> dict[str, set[str]]:
    """The ``a ──► b, c`` lines of the page's first ``text`` block; ``(nothing)`` is none."""
    block = re.search(r"```text\n(.*?)```", text, re.S)
    assert block, "docs/architecture.md has no ```text block of import edges"
    edges: dict[str, set[str]] = {}
    for line in block.group(1).splitlines():
        if "──►" not in line:
            continue
        left, right = (part.strip() for part in line.split("──►", 1))
        targets = set() if right.startswith("(") else {t.strip() for t in right.split(",")}
        assert left not in edges, f"{left} appears twice in the block"
        edges[left] = targets
    return edges


def unit_of(module: str) -> str:
    """The package (or top-level module) of a dotted ``benchbox.…`` name: the layering's unit."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "benchbox"


def module_name(path: Path) -> str:
    parts = ["benchbox", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements run at import: the module body, into if/try blocks (not TYPE_CHECKING)."""
    out: list[ast.stmt] = []
    for node in body:
        if _is_type_checking(node):
            continue
        out.append(node)
        if isinstance(node, (ast.If, ast.Try)):
            for inner in (node.body, node.orelse, getattr(node, "finalbody", [])):
                out += _top_level(inner)
            for handler in getattr(node, "handlers", []):
                out += _top_level(handler.body)
    return out


def imported_names(path: Path, node: ast.stmt) -> list[str]:
    """Absolute module names an import statement loads (``from benchbox import x`` → ``benchbox.x``
    when x is a submodule, else ``benchbox``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        here = module_name(path).split(".")
        if path.name != "__init__.py":
            here = here[:-1]
        base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    names = [base]
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        rel = Path(*sub.split(".")[1:]) if sub.startswith("benchbox.") else None
        if rel and ((PACKAGE / rel).with_suffix(".py").exists() or (PACKAGE / rel / "__init__.py").exists()):
            names.append(sub)
    return names


@functools.cache
def package_edges() -> dict[tuple[str, str], list[str]]:
    """Every import from one package of benchbox to another: (from, to) → where."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        src = unit_of(module_name(path))
        for node in ast.walk(parsed(path)):
            for name in imported_names(path, node):  # type: ignore[arg-type]
                if name == "benchbox" or name.startswith("benchbox."):
                    dst = unit_of(name)
                    if dst != src:
                        where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"  # type: ignore[attr-defined]
                        found = edges.setdefault((src, dst), [])
                        if where not in found:
                            found.append(where)
    return edges


def module_edges() -> dict[str, set[str]]:
    """Every import from one module of benchbox to another, wherever it sits: module → modules.
    ``from package import submodule`` is an edge to the submodule alone."""
    edges: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        src = module_name(path)
        for node in ast.walk(parsed(path)):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            names = imported_names(path, node)
            if isinstance(node, ast.ImportFrom) and len(names) == len(node.names) + 1:
                names = names[1:]  # every name imported is a submodule: the package is only their path
            edges.setdefault(src, set()).update(
                n for n in names if n.startswith("benchbox.") and n != src)
    return edges


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of ``graph`` with more than one node (Tarjan's algorithm,
    without recursion), each sorted: the import cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, targets = work[-1]
            nxt = next((t for t in targets if t not in index or t in stack), None)
            if nxt is not None and nxt not in index:
                index[nxt] = low[nxt] = len(index)
                stack.append(nxt)
                work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                continue
            if nxt is not None:
                low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = stack[stack.index(node):]
                del stack[stack.index(node):]
                if len(part) > 1:
                    found.append(sorted(part))
    return found


def units() -> set[str]:
    found = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    found |= {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    return found - EXEMPT


def test_every_import_between_packages_is_an_edge_the_page_documents() -> None:
    allowed = documented_edges(ARCHITECTURE.read_text())
    undocumented = [f"{src} ──► {dst} ({', '.join(where)})"
                    for (src, dst), where in sorted(package_edges().items())
                    if src not in EXEMPT and dst not in ALWAYS_ALLOWED and dst not in allowed.get(src, set())]
    assert undocumented == [], "imports docs/architecture.md does not allow:\n" + "\n".join(undocumented)


def test_the_page_has_a_line_and_a_paragraph_for_every_package() -> None:
    text = ARCHITECTURE.read_text()
    edges = documented_edges(text)
    assert set(edges) == units(), "the block's packages differ from benchbox's"
    named = {t for targets in edges.values() for t in targets}
    assert named <= units(), f"the block names packages that do not exist: {named - units()}"
    missing = sorted(u for u in units() if f"**`benchbox.{u}`**" not in text)
    assert missing == [], f"no paragraph for {missing}"


def test_the_library_never_imports_the_cli() -> None:
    importers = sorted(where for (src, dst), wheres in package_edges().items()
                       for where in wheres if dst == "cli" and src != "__main__")
    assert importers == []


def import_time_closure(start: str) -> dict[str, str]:
    """The modules ``import start`` loads (by its top-level statements, parent packages
    included), each with the module that first pulled it in; third-party ones too."""
    seen: dict[str, str] = {}
    todo = [(start, "")]
    while todo:
        name, via = todo.pop()
        parts = name.split(".")
        parents = [".".join(parts[:i]) for i in range(1, len(parts))]
        for mod in [*parents, name]:
            if mod in seen:
                continue
            seen[mod] = via
            if mod.split(".")[0] != "benchbox":
                continue
            rel = Path(*mod.split(".")[1:]) if "." in mod else Path()
            path = (PACKAGE / rel / "__init__.py") if (PACKAGE / rel / "__init__.py").exists() \
                else (PACKAGE / rel).with_suffix(".py")
            tree = parsed(path)
            todo += [(n, mod) for node in _top_level(tree.body) for n in imported_names(path, node)]
    return seen


def torch_free_modules() -> list[str]:
    names = (module_name(p) for p in sorted(PACKAGE.rglob("*.py")))
    return [n for n in names if any(n == t or n.startswith(t + ".") for t in TORCH_FREE)]


@pytest.mark.parametrize("start", torch_free_modules())
def test_reading_receipts_never_imports_torch_at_import_time(start: str) -> None:
    closure = import_time_closure(start)
    heavy = {m: via for m, via in closure.items() if m.split(".")[0] in HEAVY}
    assert heavy == {}, f"importing {start} loads {heavy} (module: imported by)"


def test_the_checks_see_a_forbidden_edge(tmp_path: Path) -> None:
    """The parsing above on a page that omits an edge the source has: the edge is reported."""
    page = "```text\nstats ──► (nothing)\nreceipts ──► contracts\n```\n"
    edges = documented_edges(page)
    assert edges == {"stats": set(), "receipts": {"contracts"}}
    actual = package_edges()
    assert ("receipts", "stats") in actual and "stats" not in edges["receipts"]
    assert "torch" in import_time_closure("benchbox.runners.torch_runner")


def test_the_packages_import_each_other_without_a_cycle() -> None:
    graph: dict[str, set[str]] = {}
    for src, dst in package_edges():
        if src not in EXEMPT and dst not in EXEMPT:
            graph.setdefault(src, set()).add(dst)
    assert cycles(graph) == [], "packages that import each other, inside functions included"


def test_the_modules_of_a_package_import_each_other_without_a_cycle() -> None:
    within = {src: {d for d in dsts if unit_of(d) == unit_of(src)} for src, dsts in module_edges().items()}
    assert cycles(within) == [], "modules that import each other, inside functions included"


def test_the_cycle_check_sees_a_cycle() -> None:
    """The check above on graphs with a cycle (one through a function-level import of the
    source), and without one."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set(), "x": {"y"}, "y": {"x"}}) == [["x", "y"]]
    assert cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []
    edges = module_edges()
    assert "benchbox.run.sequence" in edges["benchbox.run.call"]  # imported inside run()
    assert "benchbox.run" not in edges["benchbox.run.worker"]  # ``from benchbox.run import interrupt``
    assert "benchbox.run.interrupt" in edges["benchbox.run.worker"]
