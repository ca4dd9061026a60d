"""Imports run one way: no package of the project has a cycle of imports between its modules,
counting imports made inside functions (read from the source by tools/import_graph.py)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
import import_graph  # noqa: E402

# Every package of the project imports one way, counting imports inside functions.
ACYCLIC = ["sassas", "microbench", "kernels_sass"]


@pytest.mark.parametrize("package", ACYCLIC)
def test_no_import_cycle(package):
    found = import_graph.edges((package,))
    comps = import_graph.cycles(found)
    detail = "\n".join(f"{e.source} -> {e.target} ({e.path}:{e.line})"
                       for c in comps for e in import_graph.cycle_edges(found, c))
    assert not comps, f"import cycles in {package}: {comps}\n{detail}"


def _outside(module: str, package: str) -> bool:
    return module != package + ".__init__" and not module.startswith(package + ".")


def test_nothing_at_run_time_imports_the_learner():
    """The learner (sassas.learn) sits beside the ISA layer: it imports the assembler's modules,
    none of them imports it. (microbench/verify.py and kernels_sass check cubins against its
    oracle: tools, not the assembler.)"""
    found = [e for e in import_graph.edges(("sassas",)) if not _outside(e.target, "sassas.learn")
             and _outside(e.source, "sassas.learn")]
    assert not found, "\n".join(f"{e.source} -> {e.target} ({e.path}:{e.line})" for e in found)


# What the ISA layer (description, data model, engine, control rules) stands on.
ISA_BELOW = {"sassas.ast", "sassas.errors", "sassas.arch", "sassas.kinds", "sassas.cache", "sassas.parse",
             "sassas.operands"}


def test_the_isa_layer_imports_only_the_layers_below_it():
    found = [e for e in import_graph.edges(("sassas",)) if not _outside(e.source, "sassas.isa")
             and _outside(e.target, "sassas.isa") and e.target not in ISA_BELOW]
    assert not found, "\n".join(f"{e.source} -> {e.target} ({e.path}:{e.line})" for e in found)


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
