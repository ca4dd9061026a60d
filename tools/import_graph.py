"""The import graph of the project's packages, read from the source with `ast` (nothing is imported).

Every import counts: module level, inside functions and classes, under `if TYPE_CHECKING`, and
relative ones. An edge `a -> b` means module `a` imports module `b` (for `from pkg import name`,
`pkg.name` when that is a module, else `pkg`). A package's `__init__` counts as a module of its
own: `from . import x` inside `pkg/y.py` is an edge to `pkg.x`, not to `pkg`.

    python tools/import_graph.py                      # cycles (strongly connected components) of all packages
    python tools/import_graph.py sassas --edges       # ... and every edge inside the cycles, with file:line
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("sassas", "microbench", "kernels_sass")


@dataclass(frozen=True)
class Edge:
    source: str        # importing module, dotted
    target: str        # imported module, dotted
    path: str          # file of the import, relative to the root
    line: int
    local: bool        # made inside a function or class body


def modules(package: str, root: str = ROOT) -> dict[str, str]:
    """Dotted module name -> file path, for every .py file under `package`."""
    found = {}
    for folder, dirs, files in os.walk(os.path.join(root, package)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, f), root)[:-3].split(os.sep)
                if rel[-1] == "__init__":
                    rel = rel[:-1] + ["__init__"]
                found[".".join(rel)] = os.path.join(folder, f)
    return found


def _package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:-1])


def _absolute(module: str, level: int, name: str | None) -> str:
    """The dotted name a relative import `from .{level} name import ...` in `module` refers to."""
    if level == 0:
        return name or ""
    base = _package_of(module).split(".")
    base = base[:len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([name] if name else []))


def _resolve(name: str, known: dict[str, str]) -> str | None:
    """The module of ours that importing `name` loads last: the name itself, its package's
    __init__, or its longest prefix that is a module."""
    parts = name.split(".")
    while parts:
        dotted = ".".join(parts)
        if dotted in known:
            return dotted
        if dotted + ".__init__" in known:
            return dotted + ".__init__"
        parts.pop()
    return None


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, path: str, known: dict[str, str]):
        self.module, self.path, self.known = module, path, known
        self.depth = 0
        self.edges: list[Edge] = []

    def _add(self, target: str | None, node: ast.AST) -> None:
        if target and target != self.module:
            self.edges.append(Edge(self.module, target, os.path.relpath(self.path, ROOT), node.lineno,
                                   self.depth > 0))

    def _scoped(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _scoped

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(_resolve(alias.name, self.known), node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = _absolute(self.module, node.level, node.module)
        for alias in node.names:
            sub = _resolve(base + "." + alias.name, self.known) if base else None
            if sub is not None and sub.startswith(base + "." + alias.name):
                self._add(sub, node)           # `from pkg import module`
            else:
                self._add(_resolve(base, self.known), node)


def edges(packages=PACKAGES, root: str = ROOT) -> list[Edge]:
    """Every import between modules of `packages` (imports of other packages of the project count
    as edges too, so a cycle through two packages is found)."""
    known = {}
    for p in PACKAGES:
        known.update(modules(p, root))
    found = []
    for module, path in known.items():
        if module.split(".")[0] not in packages:
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        c = _Collector(module, path, known)
        c.visit(tree)
        found += c.edges
    return list(dict.fromkeys(found))       # `from x import a, b` is one edge


def cycles(graph_edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted, largest first."""
    succ: dict[str, set[str]] = {}
    for e in graph_edges:
        succ.setdefault(e.source, set()).add(e.target)
        succ.setdefault(e.target, set())
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        # iterative Tarjan: the graph is small, but recursion depth is not worth the risk
        work = [(v, iter(sorted(succ[v])))]
        index[v] = low[v] = counter[0]; counter[0] += 1
        stack.append(v); on_stack.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1
                    stack.append(w); on_stack.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop(); on_stack.discard(w); comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))

    for v in sorted(succ):
        if v not in index:
            visit(v)
    return sorted(out, key=lambda c: (-len(c), c))


def cycle_edges(graph_edges: list[Edge], component: list[str]) -> list[Edge]:
    members = set(component)
    return [e for e in graph_edges if e.source in members and e.target in members]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("packages", nargs="*", default=list(PACKAGES), help="packages to check (default: all)")
    ap.add_argument("--edges", action="store_true", help="list the imports inside each cycle")
    args = ap.parse_args(argv)
    found = edges(tuple(args.packages))
    comps = cycles(found)
    local = sum(e.local for e in found if e.source.split(".")[0] == e.target.split(".")[0])
    inner = sum(e.source.split(".")[0] == e.target.split(".")[0] for e in found)
    print(f"{inner} imports inside {', '.join(args.packages)} ({local} inside functions); "
          f"{len(comps)} cycle(s)")
    for comp in comps:
        print(f"\ncycle of {len(comp)} modules: {' '.join(comp)}")
        if args.edges:
            for e in sorted(cycle_edges(found, comp), key=lambda e: (e.source, e.target, e.line)):
                print(f"  {e.source} -> {e.target}   {e.path}:{e.line}{'  (in a function)' if e.local else ''}")
    return 1 if comps else 0


if __name__ == "__main__":
    sys.exit(main())
