"""The import graph of ponder/ and explorer/ has no cycle, counting the imports inside functions.

Built with `ast` from the sources (nothing is imported): `import a.b` is an arrow to module a.b, `from a import b`
to a.b when that is a module, else to a. Only imports under `if TYPE_CHECKING:` are left out: they never run.
"""
import ast
import functools
from pathlib import Path


from helpers import ROOT

PACKAGES = ("ponder", "explorer")


def modules(root: Path, packages=PACKAGES) -> dict:
    """{dotted name: file} of every module of the packages (a package is its __init__.py)."""
    out = {}
    for package in packages:
        for f in sorted((root / package).rglob("*.py")):
            parts = f.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


@functools.cache
def _runtime_nodes(f: Path) -> tuple:
    """Every node of the file's syntax tree except the bodies of `if TYPE_CHECKING:` blocks (read once a run:
    the two tree-wide checks below share them)."""
    return tuple(_walk(ast.parse(f.read_text(), str(f))))


@functools.cache
def _all_nodes(f: Path) -> tuple:
    """Every statement of the file, those under `if TYPE_CHECKING:` too (a circle of files even for the type checker)."""
    return tuple(_walk(ast.parse(f.read_text(), str(f)), type_checking=True))


def _walk(tree, type_checking: bool = False):
    """The statements (an import is one; no expression holds one), through every block's body."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if not type_checking and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo += node.orelse
        else:
            for block in ("body", "orelse", "finalbody", "handlers", "cases"):
                todo += getattr(node, block, ())


def import_graph(mods: dict, nodes=_runtime_nodes) -> dict:
    """{module: {module it imports: line}} between the given modules, wherever the import statement is (nodes: the
    statements read of a file; _all_nodes counts the type checker's imports too)."""
    def known(name):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for name, f in mods.items():
        package = name.split(".") if f.name == "__init__.py" else name.split(".")[:-1]
        arrows = graph[name] = {}
        for node in nodes(f):
            if isinstance(node, ast.Import):
                targets = [known(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]).strip(".") \
                    if node.level else node.module
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else known(base) for a in node.names]
            else:
                continue
            for t in targets:
                if t and t != name:
                    arrows.setdefault(t, node.lineno)
    return graph


def cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop())
                on.discard(comp[-1])
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_graph_builder_sees_imports_inside_functions_and_finds_a_cycle(tmp_path):
    (tmp_path / "ponder" / "sub").mkdir(parents=True)
    (tmp_path / "explorer").mkdir()
    files = {"ponder/__init__.py": "", "ponder/a.py": "from .sub import b\n",
             "ponder/sub/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import x\n",
             "ponder/sub/b.py": "def f():\n    from ponder import c\n",
             "ponder/c.py": "import ponder.a as a\n", "explorer/__init__.py": "", "explorer/d.py": "import ponder.c\n"}
    for path, text in files.items():
        (tmp_path / path).write_text(text)
    graph = import_graph(modules(tmp_path))
    assert graph == {"ponder": {}, "ponder.a": {"ponder.sub.b": 1}, "ponder.c": {"ponder.a": 1}, "ponder.sub": {},
                     "ponder.sub.b": {"ponder.c": 2}, "explorer": {}, "explorer.d": {"ponder.c": 1}}
    assert cycles(graph) == [["ponder.a", "ponder.c", "ponder.sub.b"]]


def test_no_import_cycle_in_ponder_or_explorer():
    graph = import_graph(modules(ROOT))
    found = cycles(graph)
    arrows = [f"{a} -> {b} (line {line})" for comp in found for a in comp for b, line in graph[a].items() if b in comp]
    assert not found, "\n".join(arrows)


def test_no_circle_of_files_even_for_the_type_checker_in_ponder_explorer_or_bench():
    graph = import_graph(modules(ROOT, PACKAGES + ("bench",)), nodes=_all_nodes)
    found = cycles(graph)
    arrows = [f"{a} -> {b} (line {line})" for comp in found for a in comp for b, line in graph[a].items() if b in comp]
    assert not found, "\n".join(arrows)


def imports_streamlit(f: Path) -> bool:
    """f imports Streamlit or a Streamlit component (anywhere in it, inside functions too)."""
    for node in _runtime_nodes(f):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
        if any(n.split(".")[0].startswith("streamlit") for n in names):
            return True
    return False


def test_only_explorer_app_reaches_streamlit():
    """The tree says which modules use Streamlit: those of explorer/app/ and the per-task sections of
    explorer/tasks/. The rest of explorer/ (figures/, jobs/, drawing/ and its top-level modules) and ponder/ import
    it neither directly nor through another module."""
    mods = modules(ROOT)
    graph = import_graph(mods)
    reach = {m for m, f in mods.items() if imports_streamlit(f)}
    while True:
        more = {m for m in graph if m not in reach and any(t in reach for t in graph[m])}
        if not more:
            break
        reach |= more
    assert reach and not sorted(m for m in reach if not m.startswith(("explorer.app.", "explorer.tasks.")))
