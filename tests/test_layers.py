"""The layering the design promises, checked on the source: arrows point down only, no cycles.

    gpu_sharing_gym (harness + CLI)  ->  gpu_sharing_gym.agents  ->  gpu_sharing_gym.baselines
        ->  gpu_sharing_gym.plumbing (what the CLIs share)  ->  gpu_sharing_env (core)

Modules are named as they install (``agents/train.py`` is ``gpu_sharing_gym.agents.train``: the
package-dir mapping in ``pyproject.toml``, read by ``scripts/typecheck.py``).

Every import counts, including those inside functions (a lazy import is still a dependency);
only ``if TYPE_CHECKING:`` blocks are exempt.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

from tests.helpers import installed_modules

ROOT = Path(__file__).resolve().parents[1]
TOP = ("gpu_sharing_env", "gpu_sharing_gym")
#: The layers, lowest first; a module belongs to the first whose prefix it has, checked longest
#: prefix first.
LAYERS = (
    "gpu_sharing_env",
    "gpu_sharing_gym.plumbing",
    "gpu_sharing_gym.baselines",
    "gpu_sharing_gym.agents",
    "gpu_sharing_gym",
)
#: What each layer may import from the project (besides itself).
ALLOWED = {
    "gpu_sharing_env": set(),
    "gpu_sharing_gym.plumbing": {"gpu_sharing_env"},
    "gpu_sharing_gym.baselines": {"gpu_sharing_env", "gpu_sharing_gym.plumbing"},
    "gpu_sharing_gym.agents": {
        "gpu_sharing_env",
        "gpu_sharing_gym.plumbing",
        "gpu_sharing_gym.baselines",
    },
    "gpu_sharing_gym": {
        "gpu_sharing_env",
        "gpu_sharing_gym.plumbing",
        "gpu_sharing_gym.baselines",
        "gpu_sharing_gym.agents",
    },
}


def layer(module: str) -> str:
    for name in sorted(LAYERS, key=len, reverse=True):
        if module == name or module.startswith(name + "."):
            return name
    raise AssertionError(module)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, module: str) -> set[str]:
    """Project modules ``path`` imports (resolved; ``from a import b`` -> ``a.b`` if a module)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module.split(".")
                if path.name != "__init__.py":
                    pkg = pkg[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join([*pkg, base] if base else pkg)
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {m for m in out if m.split(".")[0] in TOP}


def _graph() -> nx.DiGraph:
    files = installed_modules()
    g = nx.DiGraph()
    g.add_nodes_from(files)
    for mod, path in files.items():
        for target in _imports(path, mod):
            # ``from pkg import name`` names a module when such a file exists, else the package
            while target and target not in files:
                target = target.rpartition(".")[0]
            if target and target != mod:
                g.add_edge(mod, target)
    return g


def test_arrows_point_down_only() -> None:
    bad = [
        f"{a} imports {b}"
        for a, b in _graph().edges
        if (pa := layer(a)) != (pb := layer(b)) and pb not in ALLOWED[pa]
    ]
    assert not bad, "\n".join(sorted(bad))


def test_no_import_cycles() -> None:
    g = _graph()
    # A package's __init__ re-exporting its submodules is not a cycle of dependencies between
    # modules: drop edges from a submodule to its own package's __init__ that only exist
    # because a re-export brings them back (``pkg.sub -> pkg`` when ``pkg -> pkg.sub``).
    cycles = [c for c in nx.simple_cycles(g) if len(c) > 1]
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join([*c, c[0]]) for c in cycles[:10])


def test_core_names_no_policy_package() -> None:
    """The core's registry finds policies through entry points, not by importing them."""
    core = [e for e in _graph().edges if e[0].startswith("gpu_sharing_env")]
    assert all(b.startswith("gpu_sharing_env") for _, b in core)


def test_every_package_folder_installs() -> None:
    """Every folder with an ``__init__.py`` under the installed roots is in the wheel's list."""
    listed = {p.parent for p in installed_modules().values()}
    folders = {
        p.parent
        for top in ("gpu_sharing_env", "gpu_sharing_gym", "agents", "baselines", "configs")
        for p in (ROOT / top).rglob("__init__.py")
    }
    assert folders <= listed, sorted(str(f) for f in folders - listed)


#: The core's rooms (issue 51) and what each may import from the rest of the core, as module
#: prefixes (``gpu_sharing_env.`` left out); a room always imports itself. Lowest first:
#: physics knows only the job schema's model-class names; the workload, the fleet and the
#: simulator build on it; the evaluation loop and the Gymnasium envs sit on top. Two arrows go
#: "up" by design and are named here: the simulator's metric accumulator integrates the schema
#: of ``evaluation.metrics`` between events, and the sharing calibration evaluates the online
#: latency model of ``sim.online``. The compiled rooms (the workload, the fleet, the simulator,
#: the envs) may import the package's ``_cython`` shim (Cython's directives, no-ops
#: interpreted), which imports nothing of the core.
ROOMS = {
    "physics": {"workload.job"},
    "workload": {"physics", "config", "_cython", ""},
    "fleet": {"physics", "workload", "config", "_cython", ""},
    "calibration": {"physics", "sim.online"},
    "sim": {"physics", "workload", "fleet", "config", "evaluation.metrics", "_cython", ""},
    "evaluation": {"physics", "workload", "fleet", "config", "sim", "policy"},
    "policy": {"sim"},
    "registry": {"policy"},
    "envs": {"physics", "workload", "fleet", "config", "sim", "evaluation", "_cython", ""},
}


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "gpu_sharing_env" and len(parts) > 1 else None


def test_core_rooms_point_down_only() -> None:
    bad = []
    for a, b in _graph().edges:
        ra, rb = _room(a), _room(b)
        if ra not in ROOMS or ra == rb or not b.startswith("gpu_sharing_env"):
            continue
        target = b.removeprefix("gpu_sharing_env").removeprefix(".")
        # "" is the package itself (``from gpu_sharing_env import COMPILED``)
        if not any(
            target == p or target.startswith(p + ".") or (p == "" and target == "")
            for p in ROOMS[ra]
        ):
            bad.append(f"{a} imports {b}")
    assert not bad, "\n".join(sorted(bad))


def test_every_core_room_is_listed() -> None:
    core = ROOT / "gpu_sharing_env"
    rooms = {p.parent.name for p in core.glob("*/__init__.py")} | {
        p.stem for p in core.glob("*.py") if not p.stem.startswith("_")
    }
    assert rooms - {"config", "__init__"} <= set(ROOMS), sorted(rooms - set(ROOMS))
