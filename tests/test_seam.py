"""The simulator's public seam: no code outside ``gpu_sharing_env/sim/`` reads or writes a
member of the simulator (or of the objects it hands out there: its view, its event queue, its
job states) whose name starts with ``_``. Outside code uses observers
(:mod:`gpu_sharing_env.sim.observe`), :meth:`Simulator.copy`, the lookahead steps and
:class:`ClusterView`'s public methods instead.

Checked on the source: every ``obj._name`` attribute access (``self``/``cls`` excepted, which
are a class's own members) and every ``getattr``/``setattr``/``hasattr``/``delattr`` with a
string naming such a member, where ``_name`` is defined by a class in ``sim/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import installed_modules

ROOT = Path(__file__).resolve().parents[1]
SIM = ROOT / "gpu_sharing_env" / "sim"
REFLECT = {"getattr", "setattr", "hasattr", "delattr"}


def _private_members() -> set[str]:
    """``_x`` names that classes in ``sim/`` define: methods, class-level annotations and
    attributes they assign on ``self``."""
    names: set[str] = set()
    for path in SIM.glob("*.py"):
        for cls in (
            n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)
        ):
            for node in ast.walk(cls):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(node.name)
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    names.add(node.target.id)
                elif (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "self"
                    and isinstance(node.ctx, ast.Store)
                ):
                    names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _violations(path: Path, private: set[str]) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute) and node.attr in private:
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            out.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in REFLECT
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in private
        ):
            out.append(
                f"{path.relative_to(ROOT)}:{node.lineno}: {node.func.id}({node.args[1].value!r})"
            )
    return out


def test_private_members_are_found() -> None:
    private = _private_members()
    assert {"_handle", "_integrate", "_sim", "_observers", "_mask_cache", "_rows"} <= private


def test_no_private_simulator_member_is_touched_outside_sim() -> None:
    private = _private_members()
    files = [p for p in installed_modules().values() if SIM not in p.parents]
    files += sorted((ROOT / "scripts").glob("*.py"))
    bad = [v for p in files for v in _violations(p, private)]
    assert not bad, "private simulator members used outside sim/:\n" + "\n".join(bad)
