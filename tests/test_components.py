"""Components that own their state (issue 51's last "Done when": no class in ``sim/`` holds more
than ~20 attributes; nothing outside a component writes its state).

Three guards, all AST scans of the source (they need nothing built):

* every class of ``gpu_sharing_env/sim/`` and ``gpu_sharing_env/fleet/`` sets at most :data:`MAX_ATTRIBUTES` distinct
  ``self.X`` (tuple targets included) and names at most as many in ``__slots__``; the job
  record ``JobState`` among them (its serving state and its accounting are sub-records);
* no code outside ``gpu_sharing_env/sim/`` (and ``fleet/``, the cluster's own) assigns an
  attribute of a simulator, of one of its components (reached through ``sim.``,
  ``simulator.``, ``.lifecycle.``, ``.rates.``, ...) or of a job record (``sim.jobs[j]``, a
  variable holding one, its ``serving`` or ``ledger``). ``tests/test_sim_seam.py`` holds the
  simulator half of the scan (:func:`~tests.test_sim_seam.simulator_writes`) and its own
  test; here it runs with the rest over every file, and a planted write is shown to fail it;
* no code outside ``fleet/`` assigns a cluster's attribute or an item of its arrays (its
  writers are its methods: ``Cluster.add``, ``remove``, ``set_ready``, ...).

The scans read names, not types, so they see what the project's conventions name: a simulator
as ``sim``/``simulator`` (or reached through one, or through a component's attribute), a job
record as ``st`` (every variable of that name, in any file), from ``X.jobs[j]`` or a loop over
``X.jobs``, a cluster as ``cluster``/``X.cluster``. They miss a write through another alias
(``c = sim.cluster; c.version += 1``, ``world = sim.copy(); world.now = 3``, ``sims[0].now``),
a mutating call (``sim.cluster.n_res.fill(0)``, ``st.gpus.append(5)``,
``object.__setattr__``), and an item of a record's container (``st.frac[0] = 0.5``). None of
these appear in the project today; a review, not this test, is what catches them.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_sim_seam import SCANNED, SIM_COMPONENTS, assigned_targets, simulator_writes

ROOT = Path(__file__).resolve().parents[1]
SIM_DIR = ROOT / "gpu_sharing_env" / "sim"
FLEET_DIR = ROOT / "gpu_sharing_env" / "fleet"
#: Where the simulator's state lives: code here writes it (through its own classes).
OWNERS = (SIM_DIR, FLEET_DIR)

#: The most attributes a class of ``sim/`` or ``fleet/`` may hold (issue 51: "no class in sim/
#: holds more than ~20 attributes").
MAX_ATTRIBUTES = 20
#: Classes of ``sim/`` or ``fleet/`` allowed more, each with its reason. An entry is
#: ``"module.Class": its count`` (the count it may not exceed), removed once the class is split.
ALLOWED_OVER: dict[str, int] = {
    # the frozen record of one job that ``ClusterView.job`` hands every policy: its 23 fields
    # are the public read API the heuristics and the encoders use (docs/simulator.md), a value,
    # not a component holding state
    "view.JobView": 23,
    # the episode's running sums (``sim/accumulator.py``; the dataclass ``evaluation.metrics``
    # held until 2026-11-29): the metrics' 25 inputs, read as a record by the metrics, the
    # rewards and the tests, a value the components add to, not a component holding state
    "accumulator.Accumulator": 25,
}

#: The simulator's attributes that are its components (``sim.rates``): an assignment through
#: one of them (``env.simulator.rates.x = ...``, ``self._sim.lifecycle.y = ...``) writes a
#: component's state, whatever the root is called.
COMPONENT_ATTRS = frozenset(SIM_COMPONENTS) | {"events"}  # (and the event heap)
#: Names a simulator goes by anywhere in a chain (``runner._sim.now``, ``env.simulator.now``).
SIM_NAMES = frozenset({"sim", "simulator", "_sim", "_simulator"})
#: ``JobState``'s sub-records: their fields are the job record's.
SUB_RECORDS = frozenset({"serving", "ledger"})
#: The project's name for a job record (``st = sim.jobs[j]``), taken as one wherever it is bound.
RECORD_NAME = "st"

#: Writes tests make to a job record or a component, with the reason. Never grow it: a test
#: reaches a state through the simulator's public methods (``apply``, ``advance``,
#: ``inject_fault``, ``set_true_spec``, ...).
TEST_WRITES_ALLOWED = {
    # a running job that outran its estimate (the simulator re-estimates only queued jobs;
    # nothing but this test needs a running one's changed)
    ("tests/test_planner.py", "spec"),
    # that the settings' writes raise (``tests/test_sim_seam.py``'s own allow-list)
    ("tests/test_sim_seam.py", "decision_scope"),
    ("tests/test_sim_seam.py", "window_order"),
    # a service's observed latency set over and under the probe's threshold
    ("tests/test_service_moves.py", "p99_ms"),
    # a resident's throttle moved behind the rates' back: a dirty GPU named fresh is recomputed
    ("tests/test_refresh_fresh.py", "throttle"),
}


# ---------------------------------------------------------------------- attributes per class
def _is_dataclass(cls: ast.ClassDef) -> bool:
    for d in cls.decorator_list:
        f = d.func if isinstance(d, ast.Call) else d
        if (isinstance(f, ast.Name) and f.id == "dataclass") or (
            isinstance(f, ast.Attribute) and f.attr == "dataclass"
        ):
            return True
    return False


def class_attributes(cls: ast.ClassDef) -> set[str]:
    """The attributes a class holds: every ``self.X`` it assigns (plain, augmented, annotated
    and tuple targets, ``setattr(self, "X", ...)``, in any of its methods; a nested class
    counts on its own), every name of its ``__slots__`` and, for a ``@dataclass``, its
    annotated fields (``ClassVar`` ones not)."""
    names: set[str] = set()

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                continue
            for t in () if isinstance(child, ast.Delete) else assigned_targets(child):
                if isinstance(t, ast.Attribute) and _is_self(t.value):
                    names.add(t.attr)
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Name)
                and child.func.id == "setattr"
                and len(child.args) > 1
                and _is_self(child.args[0])
            ):
                name = child.args[1]
                names.add(str(name.value) if isinstance(name, ast.Constant) else "?")
            walk(child)

    walk(cls)
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in stmt.targets
        ):
            names.update(ast.literal_eval(stmt.value))
        if (
            _is_dataclass(cls)
            and isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and "ClassVar" not in ast.unparse(stmt.annotation)
        ):
            names.add(stmt.target.id)
    return names


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def class_sizes(folder: Path) -> dict[str, int]:
    """``"module.Class"`` -> how many attributes it holds, for every class of ``folder``."""
    sizes = {}
    for p in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                sizes[f"{p.stem}.{node.name}"] = len(class_attributes(node))
    return sizes


def test_class_attributes_counts_every_form() -> None:
    src = (
        "class A:\n"
        "    __slots__ = ('a', 'z')\n"
        "    def f(self, other):\n"
        "        self.a = 1\n"
        "        self.b: int = 2\n"
        "        self.c += 3\n"
        "        (self.d, [self.e, *self.f]) = g\n"
        "        other.x = 4\n"  # (another object's)
        "        self.a.y = 5\n"  # (its attribute's attribute)
        "        setattr(self, 'g', 6)\n"
        "        self.i[0] = 7\n"  # (an item of ``i``, not an attribute of ``self``)
        "        class B:\n"  # (a nested class holds its own)
        "            def f(self):\n"
        "                self.j = 0\n"
        "@dataclass(frozen=True)\n"
        "class C:\n"
        "    k: int\n"
        "    m: ClassVar[int] = 0\n"  # (a class variable, no field)
    )
    a, c = (n for n in ast.parse(src).body if isinstance(n, ast.ClassDef))
    b = next(n for n in ast.walk(a) if isinstance(n, ast.ClassDef) and n.name == "B")
    assert class_attributes(a) == {"a", "b", "c", "d", "e", "f", "g", "z"}
    assert class_attributes(b) == {"j"} and class_attributes(c) == {"k"}


def _over_the_bound(sizes: dict[str, int]) -> dict[str, int]:
    over = {
        name: n
        for name, n in sizes.items()
        if n > MAX_ATTRIBUTES and n > ALLOWED_OVER.get(name, MAX_ATTRIBUTES)
    }
    stale = {name for name in ALLOWED_OVER if name in sizes and sizes[name] <= MAX_ATTRIBUTES}
    assert stale == set(), "stale allow-list entries: remove them"
    return over


def test_sim_classes_hold_at_most_20_attributes() -> None:
    sizes = class_sizes(SIM_DIR)
    assert {"state.JobState", "view.ClusterView", "engine.Simulator"} <= set(sizes)
    over = _over_the_bound(sizes)
    assert over == {}, f"split these classes (at most {MAX_ATTRIBUTES} attributes each)"


def test_fleet_classes_hold_at_most_20_attributes() -> None:
    sizes = class_sizes(FLEET_DIR)
    assert {"cluster.Cluster", "cluster.Fleet", "cluster.Masks"} <= set(sizes)
    over = _over_the_bound(sizes)
    assert over == {}, f"split these classes (at most {MAX_ATTRIBUTES} attributes each)"


# ---------------------------------------------------------------------- writes from outside
def _chain(node: ast.expr) -> list[str]:
    """The names along an attribute chain, root first (``a.b[0].c`` -> ``[a, b, [], c]``)."""
    out: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            out.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            out.append("[]")
            node = node.value
        elif isinstance(node, ast.Call):
            out.append("()")
            node = node.func
        else:
            out.append(node.id if isinstance(node, ast.Name) else "?")
            return out[::-1]


def _is_jobs_lookup(node: ast.expr) -> bool:
    """``X.jobs[j]`` or ``X.jobs.get(j)``: a job record by id (the simulator's, its table's)."""
    if isinstance(node, ast.Subscript):
        return isinstance(node.value, ast.Attribute) and node.value.attr == "jobs"
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "jobs"
    )


def _jobs_iter_target(node: ast.For | ast.comprehension) -> ast.expr | None:
    """The loop variable bound to a record in ``for st in X.jobs.values()`` or
    ``for j, st in X.jobs.items()`` (None for any other loop)."""
    it = node.iter
    if not (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Attribute)
        and isinstance(it.func.value, ast.Attribute)
        and it.func.value.attr == "jobs"
    ):
        return None
    if it.func.attr == "values":
        return node.target
    if it.func.attr == "items" and isinstance(node.target, ast.Tuple):
        return node.target.elts[-1]
    return None


def _bound_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names the module binds to a job record (``RECORD_NAME``; from ``X.jobs[j]``, a loop over
    ``X.jobs``, an annotation ``JobState``) and to a sub-record (``sv = st.serving``)."""
    records = {RECORD_NAME}
    subs: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if _is_jobs_lookup(node.value):
                records.update(names)
            elif isinstance(node.value, ast.Attribute) and node.value.attr in SUB_RECORDS:
                subs.update(names)
        elif isinstance(node, ast.For | ast.comprehension):
            t = _jobs_iter_target(node)
            if isinstance(t, ast.Name):
                records.add(t.id)
        elif isinstance(node, ast.arg | ast.AnnAssign):
            ann = node.annotation
            name = node.arg if isinstance(node, ast.arg) else getattr(node.target, "id", None)
            if name and ann is not None and "JobState" in ast.unparse(ann):
                records.add(name)
    return records, subs


def outside_writes(source: str) -> list[tuple[int, str]]:
    """(line, written chain) of every assignment in ``source`` (``=``, augmented, annotated,
    tuple targets, ``del``, ``setattr``) to an attribute of a simulator or a component
    (:func:`~tests.test_sim_seam.simulator_writes`; or through a component attribute or a
    simulator's name anywhere in the chain) or of a job record or its sub-records."""
    tree = ast.parse(source)
    records, subs = _bound_names(tree)

    def is_record(e: ast.expr) -> bool:
        return (isinstance(e, ast.Name) and e.id in records) or _is_jobs_lookup(e)

    def is_sub_record(e: ast.expr) -> bool:
        if isinstance(e, ast.Name):
            return e.id in subs
        return isinstance(e, ast.Attribute) and e.attr in SUB_RECORDS

    def owned(e: ast.expr) -> bool:
        """Whether an attribute of ``e`` is state a component or the job record owns."""
        chain = _chain(e)
        through = any(x in COMPONENT_ATTRS or x in SIM_NAMES for x in chain)
        return through or is_record(e) or is_sub_record(e)

    found: dict[tuple[int, str], str] = {}  # (line, attribute) -> the written chain
    for node in ast.walk(tree):
        for t in assigned_targets(node):
            if isinstance(t, ast.Attribute) and owned(t.value):
                found[t.lineno, t.attr] = ".".join(_chain(t))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("setattr", "delattr")
            and len(node.args) >= 2
            and owned(node.args[0])
        ):
            name = node.args[1]
            attr = str(name.value) if isinstance(name, ast.Constant) else "?"
            found[node.lineno, attr] = ".".join([*_chain(node.args[0]), attr])
    for line, attr in simulator_writes(source):  # (``sim2.x``, ``sim_a.x``, ...)
        found.setdefault((line, attr.rsplit(".", 1)[-1]), attr)
    return sorted((line, chain) for (line, _), chain in found.items())


def test_the_scan_finds_every_planted_write() -> None:
    src = (
        "sim.now = 0\n"  # 1: the simulator's clock
        "env.simulator.rates.mechanisms = m\n"  # 2: a component, through its attribute
        "sim.jobs[3].ledger.finish_t = 0.0\n"  # 3: a record's sub-record, by id
        "st = sim.jobs[j]\n"
        "st.work_done += 1.0\n"  # 5: a record in a variable
        "for job in simulator.jobs.values():\n"
        "    job.throttle, job.rate = 1.0, 0.0\n"  # 7: records in a loop, a tuple target
        "sv = st.serving\n"
        "sv.rps = 2.0\n"  # 9: a sub-record in a variable
        "setattr(st, 'rate', 0.0)\n"  # 10
        "def f(x: JobState) -> None:\n"
        "    x.status = s\n"  # 12: an annotated record
        "self._sim.lifecycle.predictor = None\n"  # 13
        "del sim.table.jobs[1].spec\n"  # 14
        # none of these writes a simulator's or a record's state
        "view.now_s = 1.0\n"
        "row.duty = 0.5\n"
        "x = st.ledger.finish_t\n"
        "policy.window_order = 'fifo'\n"
        "sim.jobs[3].frac[0] = 0.5\n"  # (a subscript: not an attribute assignment)
        "self.sim = sim\n"  # (an object's own reference to a simulator)
    )
    got = outside_writes(src)
    assert [line for line, _ in got] == [1, 2, 3, 5, 7, 7, 9, 10, 12, 13, 14], got
    assert got[:3] == [
        (1, "sim.now"),
        (2, "env.simulator.rates.mechanisms"),
        (3, "sim.jobs.[].ledger.finish_t"),
    ]
    # the simulator half's own conventions (``tests/test_sim_seam.py``) hold here too
    assert outside_writes("sim2.n_events += 1\nsim_a.done = True\n") == [
        (1, "n_events"),
        (2, "done"),
    ]


def test_a_planted_write_in_an_outside_module_fails_the_scan() -> None:
    """The episode runner as it is passes the scan; with a ``sim.now = 0`` planted in its
    function that builds views, it does not."""
    path = ROOT / "gpu_sharing_env" / "evaluation" / "runner.py"
    src = path.read_text(encoding="utf-8")
    assert outside_writes(src) == []
    anchor = "        view = ClusterView(sim, codec)\n"
    assert src.count(anchor) == 1
    planted = src.replace(anchor, anchor + "        sim.now = 0\n")
    line = planted[: planted.index("sim.now = 0")].count("\n") + 1
    assert outside_writes(planted) == [(line, "sim.now")]


def _outside_files() -> list[Path]:
    files = [p for d in SCANNED for p in sorted((ROOT / d).rglob("*.py"))]
    return [p for p in files if not any(o in p.parents for o in OWNERS)]


def test_nothing_outside_sim_writes_component_or_job_state() -> None:
    files = _outside_files()
    assert len(files) > 100  # (the scan does see the project)
    outside, in_tests = [], set()
    for p in files:
        rel = p.relative_to(ROOT).as_posix()
        for line, chain in outside_writes(p.read_text(encoding="utf-8")):
            attr = chain.rsplit(".", 1)[-1]
            if (rel, attr) in TEST_WRITES_ALLOWED:
                in_tests.add((rel, attr))
            else:
                outside.append(f"{rel}:{line}: {chain} = ...")
    assert outside == [], "call the owning component's method (or the simulator's) instead"
    assert TEST_WRITES_ALLOWED - in_tests == set(), "stale entries: remove them"


# ---------------------------------------------------------------------- a cluster's state
def _is_cluster(node: ast.expr) -> bool:
    """Whether an expression names a cluster by the project's convention: ``cluster``
    (``_cluster``, ``cluster2``), or any ``X.cluster`` / ``X._cluster``."""
    if isinstance(node, ast.Name):
        return node.id.strip("_").rstrip("0123456789") == "cluster"
    return isinstance(node, ast.Attribute) and node.attr in ("cluster", "_cluster")


def cluster_writes(source: str) -> list[tuple[int, str]]:
    """(line, attribute) of every assignment to a cluster's attribute or to one of its
    arrays' or lists' items (``cluster.n_res[0] = 1``, ``sim.cluster.version += 1``), or of
    its components' (``cluster.fleet.n_gpus = 2``: ``"fleet.n_gpus"``)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        for t in assigned_targets(node):
            while isinstance(t, ast.Subscript):  # (an item of a cluster's array writes it)
                t = t.value
            chain: list[str] = []
            while isinstance(t, ast.Attribute):
                chain.append(t.attr)
                if _is_cluster(t.value):
                    found.append((t.lineno, ".".join(reversed(chain))))
                    break
                t = t.value
    return found


def test_the_cluster_write_scan_sees_every_form() -> None:
    src = (
        "cluster.version = 0\n"
        "sim.cluster.n_res[3] = 1\n"
        "self._cluster.ready[g] &= False\n"
        "c2, cluster.mode = 1, m\n"
        "env.unwrapped.sim.cluster.fleet.n_gpus = 2\n"
        "x = cluster.n_res\n"  # a read
        "cluster_view.version = 1\n"  # not a cluster
        "del cluster.residents[0]\n"
    )
    assert cluster_writes(src) == [
        (1, "version"),
        (2, "n_res"),
        (3, "ready"),
        (4, "mode"),
        (5, "fleet.n_gpus"),
        (8, "residents"),
    ]


def test_no_code_outside_fleet_assigns_a_cluster_s_state() -> None:
    files = [p for d in SCANNED for p in sorted((ROOT / d).rglob("*.py"))]
    files = [p for p in files if FLEET_DIR not in p.parents and p != Path(__file__).resolve()]
    assert len(files) > 100
    writes = [
        f"{p.relative_to(ROOT).as_posix()}:{line}: {attr}"
        for p in files
        for line, attr in cluster_writes(p.read_text(encoding="utf-8"))
    ]
    assert not writes, "\n".join(writes)
