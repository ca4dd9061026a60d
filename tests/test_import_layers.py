"""Imports run one way: no package of the project has a cycle of imports between its modules,
counting imports made inside functions (read from the source by tools/import_graph.py)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
import import_graph  # noqa: E402

# sassas joins this list once its modules import one way (issue 21, phase 2).
ACYCLIC = ["microbench", "kernels_sass"]


@pytest.mark.parametrize("package", ACYCLIC)
def test_no_import_cycle(package):
    found = import_graph.edges((package,))
    comps = import_graph.cycles(found)
    detail = "\n".join(f"{e.source} -> {e.target} ({e.path}:{e.line})"
                       for c in comps for e in import_graph.cycle_edges(found, c))
    assert not comps, f"import cycles in {package}: {comps}\n{detail}"


def test_the_graph_sees_function_level_and_relative_imports(tmp_path):
    pkg = tmp_path / "microbench"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import g\n")
    found = import_graph.edges(("microbench",), root=str(tmp_path))
    assert {(e.source, e.target, e.local) for e in found} == {
        ("microbench.a", "microbench.b", False), ("microbench.b", "microbench.a", True)}
    assert import_graph.cycles(found) == [["microbench.a", "microbench.b"]]
