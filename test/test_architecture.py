"""The import graph of planner_pkg follows docs/architecture.md: no cycle, no forbidden arrow.

Every ``import`` of every module is read with ``ast`` (top level and inside functions, relative
imports resolved, ``importlib.import_module("literal")`` included). Importing ``a.b.c`` also runs
the ``__init__`` of ``a.b`` and ``a`` (unless the importer is already inside them), so those count
as arrows too: a package ``__init__`` that re-exports a module drags that module's imports along.

``python test/test_architecture.py`` prints the arrows between parts and any cycle.
"""
from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "planner_pkg"
DOC = REPO / "docs" / "architecture.md"

#: The modules that make up the command line: the only ones that may import ``planner_pkg.cli``.
CLI_MODULES = {"planner_pkg.__main__", "planner_pkg.cli", "planner_pkg.policy.cli"}
#: What the simulator must never import (issue 14): it sits at the bottom, beside the world.
SIM_FORBIDDEN = ("planner_pkg.planning", "planner_pkg.policy", "planner_pkg.bridges", "planner_pkg.nodes",
                 "planner_pkg.app", "planner_pkg.cli", "planner_pkg.cli_args")
#: ROS client libraries and message packages: only planner_pkg/nodes imports them.
ROS_TOP_LEVEL = {"rclpy", "rosidl_runtime_py", "rosidl_parser", "ament_index_python", "launch", "launch_ros",
                 "tf2_ros", "builtin_interfaces", "rosgraph_msgs", "rcl_interfaces", "message_filters"}


def _is_ros(top: str) -> bool:
    return top in ROS_TOP_LEVEL or top.endswith("_msgs") or top.endswith("_srvs")


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    line: int
    implicit: bool = False  # the package __init__ an import runs, not the named module

    def __str__(self) -> str:
        how = " (its package __init__)" if self.implicit else ""
        return f"{self.source} -> {self.target}{how}, line {self.line}"


@dataclass
class Graph:
    modules: Dict[str, Path]
    arrows: List[Arrow]  # between modules of the package
    external: List[Tuple[str, str, int]]  # (module, top-level name outside the package, line)

    def adjacency(self) -> Dict[str, Set[str]]:
        adj: Dict[str, Set[str]] = {m: set() for m in self.modules}
        for a in self.arrows:
            if a.source != a.target:
                adj[a.source].add(a.target)
        return adj


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def read_graph(package_dir: Path) -> Graph:
    """Every module under ``package_dir`` and every import it makes."""
    package = package_dir.name
    modules = {_module_name(package_dir, p): p for p in sorted(package_dir.rglob("*.py"))}
    arrows: List[Arrow] = []
    external: List[Tuple[str, str, int]] = []

    def owner(name: str) -> Optional[str]:
        """The module that ``name`` (a module, or a name inside one) is defined in."""
        while name:
            if name in modules:
                return name
            name = name.rpartition(".")[0]
        return None

    for source, path in modules.items():
        here = source if path.name == "__init__.py" else source.rpartition(".")[0]
        targets: List[Tuple[str, int]] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets += [(a.name, node.lineno) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                # ``from pkg import sub`` imports the submodule (and runs pkg's __init__, below);
                # ``from pkg import name`` needs pkg itself
                subs = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in modules]
                targets += [(s, node.lineno) for s in subs]
                if len(subs) < len(node.names):
                    targets.append((mod, node.lineno))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "import_module" and node.args
                  and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                targets.append((node.args[0].value, node.lineno))
        for name, line in targets:
            if name.split(".")[0] != package:
                if name:
                    external.append((source, name.split(".")[0], line))
                continue
            target = owner(name)
            if target is None:
                continue  # a module that does not exist: the test suite's import errors say so
            arrows.append(Arrow(source, target, line))
            parent = target.rpartition(".")[0]
            while parent:  # the package __init__s this import runs
                if parent != source and not source.startswith(parent + "."):
                    arrows.append(Arrow(source, parent, line, implicit=True))
                parent = parent.rpartition(".")[0]
    return Graph(modules, arrows, external)


def import_loops(graph: Graph) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative), sorted."""
    return _components(graph.adjacency())


def import_cycles(graph: Graph) -> List[List[str]]:
    """One concrete cycle, in import order, through each of :func:`import_loops`."""
    adj = graph.adjacency()
    return [_one_cycle(adj, set(c)) for c in _components(adj)]


def _components(adj: Dict[str, Set[str]]) -> List[List[str]]:
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    components: List[List[str]] = []
    for root in sorted(adj):
        if root in index:
            continue
        work = [(root, iter(sorted(adj[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(adj[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    components.append(sorted(comp))
    return sorted(components)


def _one_cycle(adj: Dict[str, Set[str]], comp: Set[str]) -> List[str]:
    """A shortest cycle through the first module of a strongly connected component (BFS)."""
    start = min(comp)
    previous = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(adj[v] & comp):
            if w == start:
                path = [v]
                while previous[path[-1]] is not None:
                    path.append(previous[path[-1]])
                return list(reversed(path)) + [start]
            if w not in previous:
                previous[w] = v
                queue.append(w)
    raise AssertionError(f"no cycle through {start} in {sorted(comp)}")  # Tarjan said there was one


# ---------------------------------------------------------------------------------------------
# docs/architecture.md: the parts and their allowed arrows
# ---------------------------------------------------------------------------------------------
def _table(text: str, name: str) -> List[List[str]]:
    m = re.search(rf"<!-- {name}:begin -->(.*?)<!-- {name}:end -->", text, re.S)
    if m is None:
        raise AssertionError(f"{DOC}: no '<!-- {name}:begin -->' ... '<!-- {name}:end -->' table")
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in m.group(1).strip().splitlines() if line.strip().startswith("|")]
    return [r for r in rows[2:]]  # header and |---| ruler


def _names(cell: str) -> List[str]:
    return [n.strip().strip("`") for n in cell.split(",") if n.strip()]


@dataclass
class Architecture:
    patterns: List[Tuple[str, str]]  # (module pattern, part)
    allowed: Dict[str, Set[str]]  # part -> parts it may import (itself included)
    exceptions: Set[Tuple[str, str]]  # (module, module) arrows allowed despite the table

    def part_of(self, module: str) -> Optional[str]:
        best = None
        for pattern, part in self.patterns:
            if pattern.endswith(".*"):
                base = pattern[:-2]
                hit = module == base or module.startswith(base + ".")
                size = len(base)
            else:
                hit, size = module == pattern, len(pattern) + 1  # an exact name beats a package
            if hit and (best is None or size > best[0]):
                best = (size, part)
        return None if best is None else best[1]


def read_architecture(doc: Path = DOC) -> Architecture:
    text = doc.read_text(encoding="utf-8")
    patterns, allowed = [], {}
    for part, modules, may_import in _table(text, "architecture-table"):
        patterns += [(m, part) for m in _names(modules)]
        allowed[part] = {part, *_names(may_import)}
    unknown = {p for targets in allowed.values() for p in targets} - set(allowed)
    assert not unknown, f"{doc}: 'may import' names parts that have no row: {sorted(unknown)}"
    exceptions = {(src.strip("`"), dst.strip("`")) for src, dst, *_ in _table(text, "architecture-exceptions")}
    return Architecture(patterns, allowed, exceptions)


def forbidden_arrows(graph: Graph, arch: Architecture) -> List[str]:
    problems = []
    for a in graph.arrows:
        src, dst = arch.part_of(a.source), arch.part_of(a.target)
        if src is None or dst is None:
            continue  # reported by test_every_module_belongs_to_a_part
        if dst not in arch.allowed[src] and (a.source, a.target) not in arch.exceptions:
            problems.append(f"{src} -> {dst}: {a}")
    return problems


# ---------------------------------------------------------------------------------------------
# the tests
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def graph() -> Graph:
    return read_graph(REPO / PACKAGE)


@pytest.fixture(scope="module")
def arch() -> Architecture:
    return read_architecture()


def test_no_import_cycle(graph):
    loops = import_loops(graph)
    cycles = import_cycles(graph)
    assert not loops, "import cycles (move the shared names down, see docs/architecture.md):\n" + "\n".join(
        f"{' -> '.join(c)}  (modules in this loop: {', '.join(loop)})" for c, loop in zip(cycles, loops))


def test_the_simulator_knows_no_planner_policy_node_or_command_line(graph):
    bad = [str(a) for a in graph.arrows if a.source.split(".")[:2] == [PACKAGE, "sim"]
           and any(a.target == f or a.target.startswith(f + ".") for f in SIM_FORBIDDEN)]
    assert not bad, "planner_pkg.sim must sit at the bottom (world, core only):\n" + "\n".join(bad)


def test_only_the_command_line_imports_planner_pkg_cli(graph):
    bad = [str(a) for a in graph.arrows if a.target == "planner_pkg.cli" and a.source not in CLI_MODULES]
    assert not bad, "library code must not depend on the CLI entry point (use planner_pkg.cli_args):\n" + \
        "\n".join(bad)


def test_rclpy_and_ros_messages_only_in_nodes(graph):
    bad = [f"{m} imports {top}, line {line}" for m, top, line in graph.external
           if _is_ros(top) and not m.startswith("planner_pkg.nodes.") and m != "planner_pkg.nodes"]
    assert not bad, "only planner_pkg/nodes may import ROS:\n" + "\n".join(bad)


def test_every_module_belongs_to_a_part(graph, arch):
    homeless = sorted(m for m in graph.modules if arch.part_of(m) is None)
    assert not homeless, f"modules in no part of {DOC.name} (add them to its table): {homeless}"


def test_every_arrow_is_allowed_by_architecture_md(graph, arch):
    problems = forbidden_arrows(graph, arch)
    assert not problems, f"arrows {DOC.name} does not allow:\n" + "\n".join(problems)


def test_every_listed_exception_still_exists(graph, arch):
    present = {(a.source, a.target) for a in graph.arrows}
    stale = sorted(arch.exceptions - present)
    assert not stale, f"exceptions in {DOC.name} that no import needs any more (remove them): {stale}"


# the checker itself, on small packages with a known answer -----------------------------------
def _write(root: Path, files: Dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root / "pkgx"


def test_the_checker_finds_a_cycle_through_a_function_level_relative_import(tmp_path):
    pkg = _write(tmp_path, {
        "pkgx/__init__.py": "",
        "pkgx/a.py": "import os\n\ndef f():\n    from . import b\n",
        "pkgx/b.py": "from pkgx.c import thing\n",
        "pkgx/c.py": "import pkgx.a as a\nthing = 1\n",
        "pkgx/d.py": "from pkgx import a\n",  # into the cycle, not part of it
    })
    assert import_cycles(read_graph(pkg)) == [["pkgx.a", "pkgx.b", "pkgx.c", "pkgx.a"]]


def test_the_checker_counts_the_package_init_an_import_runs(tmp_path):
    # sim/__init__ re-exports the factory, the factory needs the CLI, the CLI uses sim.runner:
    # a cycle although no module names the cycle's modules directly
    pkg = _write(tmp_path, {
        "pkgx/__init__.py": "",
        "pkgx/sim/__init__.py": "from pkgx.sim.factory import make\n",
        "pkgx/sim/factory.py": "def make():\n    from pkgx.cli import CliError\n",
        "pkgx/sim/runner.py": "X = 1\n",
        "pkgx/cli.py": "import importlib\nrunner = importlib.import_module('pkgx.sim.runner')\nimport rclpy\n",
    })
    g = read_graph(pkg)
    assert import_cycles(g) == [["pkgx.cli", "pkgx.sim", "pkgx.sim.factory", "pkgx.cli"]]
    assert Arrow("pkgx.cli", "pkgx.sim", 2, implicit=True) in g.arrows
    assert ("pkgx.cli", "rclpy", 3) in g.external
    # a module importing a sibling inside its own package does not re-run the package __init__
    assert not [a for a in g.arrows if a.source.startswith("pkgx.sim.") and a.target == "pkgx.sim"]
    assert import_cycles(read_graph(_write(tmp_path / "ok", {
        "pkgx/__init__.py": "", "pkgx/a.py": "from pkgx import b\n", "pkgx/b.py": "import json\n"}))) == []


def test_the_table_reader_assigns_parts_and_flags_an_upward_arrow(tmp_path):
    doc = tmp_path / "architecture.md"
    doc.write_text(
        "<!-- architecture-table:begin -->\n| part | modules | may import |\n|---|---|---|\n"
        "| top | `pkgx.cli`, `pkgx.sim.tool` | low |\n| low | `pkgx.*` | |\n<!-- architecture-table:end -->\n"
        "<!-- architecture-exceptions:begin -->\n| from | to | why |\n|---|---|---|\n"
        "| `pkgx.sim.b` | `pkgx.sim.tool` | a reason |\n<!-- architecture-exceptions:end -->\n", encoding="utf-8")
    arch = read_architecture(doc)
    assert [arch.part_of(m) for m in ("pkgx", "pkgx.sim", "pkgx.sim.tool", "pkgx.cli", "other")] == \
        ["low", "low", "top", "top", None]
    pkg = _write(tmp_path, {"pkgx/__init__.py": "", "pkgx/cli.py": "from pkgx import sim\n",
                            "pkgx/sim/__init__.py": "def f():\n    from pkgx.cli import x\n",
                            "pkgx/sim/b.py": "from pkgx.sim import tool\n", "pkgx/sim/tool.py": ""})
    assert forbidden_arrows(read_graph(pkg), arch) == ["low -> top: pkgx.sim -> pkgx.cli, line 2"]


if __name__ == "__main__":  # print the graph between parts
    g, a = read_graph(REPO / PACKAGE), read_architecture()
    between: Dict[Tuple[str, str], int] = defaultdict(int)
    excepted: Dict[Tuple[str, str], int] = defaultdict(int)
    for arrow in g.arrows:
        s, t = a.part_of(arrow.source), a.part_of(arrow.target)
        if s != t:
            between[(s, t)] += 1
            excepted[(s, t)] += (arrow.source, arrow.target) in a.exceptions
    for (s, t), n in sorted(between.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        mark = "" if t in a.allowed.get(s, ()) else \
            f"   <- not allowed ({excepted[(s, t)]} listed as exceptions)"
        print(f"{s} -> {t}: {n}{mark}")
    for c, loop in zip(import_cycles(g), import_loops(g)):
        print("cycle:", " -> ".join(c), "| in the loop:", ", ".join(loop))
    sys.exit(0)
