"""The house plan: imports flow one way, bottom up through these floors, and draw no circle.

    0  types, errors, fileio, registry, records
                     plain records, errors, atomic files, the registry pattern, the checks a
                     stored record is read back with
    1  language      the ontology, phrasing, reading and parsing, dialogue acts, fact evidence
    2  data          formats, built datasets (layout, BuiltDataset), synthetic world, builders,
                     converters, label maps, images, stats
       index         gallery index, fused vectors and IVF; store/ (saved galleries), vectors/ (ANN)
    3  models        the trainable retrieval model, its encoders, I/O, devices, ONNX export
       vlm           the optional vision-language model: endpoint client, prompts, captions, judgements
    4  interaction   sessions, policies, re-ranking, shortlist, simulators, history
    5  evaluation    metrics, attribute metrics, static replay, online simulation, reports, pictures
       runtime       a trained run loaded and used: run, pipeline, neural backend, batch embedding
                     (with the package root ``minterpr``, which hands out ``load_pipeline``)
    6  training      trainer, stages, calibration, post-training choices, publishing (loads runs)
       ingest        video and folder ingestion (embeds through runtime.batch_embed)
    7  serving       the search service (runs ingestion jobs: above ingest)
    8  cli           commands and ``python -m minterpr``
      (benchmarks/   scripts over the package and its cli, the drawing's tenth floor)

A module may import its own floor or any floor below, never one above, with no per-module
exception; every package and root module has a floor; neither the floors nor the modules import
one another in a circle (two rooms of one floor may not import each other both ways); commands
never import each other. The core (floors 0-2) imports no torch or optional package at import
time. The floors are those ``farm-studio look`` draws from the imports (benchmarks on top).
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "minterpr"
FLOORS = [
    ("types", "errors", "fileio", "registry", "records"),
    ("language",),
    ("data", "index"),
    ("models", "vlm"),
    ("interaction",),
    ("evaluation", "runtime", "__init__"),
    ("training", "ingest"),
    ("serving",),
    ("cli", "__main__"),
]
RANK = {unit: floor for floor, units in enumerate(FLOORS) for unit in units}
CORE = {unit for units in FLOORS[:3] for unit in units}
HEAVY = {"torch", "transformers", "scipy", "matplotlib", "cv2", "sentence_transformers"}
# cli/commands/ holds one module per command, cli/shared/ what they share; main lists the commands by name
CLI_COMMANDS, CLI_SHARED = "minterpr.cli.commands.", "minterpr.cli.shared."


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["minterpr", *parts])


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _unit(module: str) -> str:
    """The floor's unit of a module: its package under minterpr, its root module, or ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _resolve(name: str) -> str | None:
    """The minterpr module an imported name lives in (``minterpr.index.store`` for a name of its ``__init__``)."""
    while name not in MODULES:
        if "." not in name:
            return None
        name = name.rsplit(".", 1)[0]
    return name


def _imports(module: str, top_level_only: bool = False):
    """Every minterpr module ``module`` imports (function-level and relative imports too), and
    every top-level name (package or module) it imports."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in tree.body if top_level_only else ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _edges() -> dict[str, set[str]]:
    """module -> the minterpr modules it imports (itself left out)."""
    edges = {}
    for module in MODULES:
        found = {_resolve(name) for name in _imports(module) if name.split(".")[0] == "minterpr"}
        edges[module] = {target for target in found if target is not None and target != module}
    return edges


EDGES = _edges()


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan, iterative)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
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
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_every_package_and_root_module_has_a_floor():
    units = {
        path.stem if path.is_file() else path.name
        for path in PACKAGE.iterdir()
        if (path.is_file() and path.suffix == ".py") or (path / "__init__.py").is_file()
    }
    assert units - set(RANK) == set(), "add them to FLOORS (and the docstring)"
    assert set(RANK) - units == set(), "FLOORS names something that is not in the package"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_flow_one_way(module):
    own = RANK[_unit(module)]
    for target in sorted(EDGES[module]):
        assert RANK[_unit(target)] <= own, f"{module} (floor {own}) imports {target} (floor {RANK[_unit(target)]})"


def test_no_import_circle_between_packages():
    graph: dict[str, set[str]] = {}
    for module, targets in EDGES.items():
        graph.setdefault(_unit(module), set()).update(_unit(t) for t in targets if _unit(t) != _unit(module))
    assert _circles(graph) == []


def test_no_import_circle_between_modules():
    assert _circles(EDGES) == []


def test_commands_never_import_each_other():
    commands = {m for m in MODULES if m.startswith(CLI_COMMANDS)}
    shared = {m for m in MODULES if m.startswith(CLI_SHARED)}
    assert commands and shared
    for module in sorted(commands | shared):
        others = sorted(EDGES[module] & commands - {module})
        assert not others, f"{module} imports the command(s) {others}: share through cli/shared"


def test_the_cli_holds_only_its_entry_points_and_two_folders():
    loose = {m for m in MODULES if m.startswith("minterpr.cli.")} - {
        m for m in MODULES if m.startswith((CLI_COMMANDS, CLI_SHARED))
    }
    assert loose <= {"minterpr.cli.main", "minterpr.cli.commands", "minterpr.cli.shared"}, (
        f"{sorted(loose)}: a command goes in cli/commands/, a shared helper in cli/shared/"
    )


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _unit(m) in CORE))
def test_core_imports_no_heavy_package_at_import_time(module):
    heavy = {m for m in _imports(module, top_level_only=True) if m.split(".")[0] in HEAVY}
    assert not heavy, f"{module} imports {heavy} at module level"


def test_importing_the_package_and_its_data_layer_loads_no_torch():
    code = (
        "import sys, minterpr, minterpr.language.evidence, minterpr.data.formats, minterpr.data.dialogue_synthesis, "
        "minterpr.index, minterpr.runtime, minterpr.evaluation.metrics; print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_tests_never_import_each_other():
    """Test modules share code through ``tests/support`` (not collected), never by importing a test
    module or the conftest."""
    tests = Path(__file__).resolve().parent
    for path in sorted(tests.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            bad = [n for n in names if n.split(".")[0].startswith("test_") or n.split(".")[0] == "conftest"]
            assert not bad, f"{path.relative_to(tests)} imports {bad}: move what it shares to tests/support"


LINE_LIMIT = 400  # a module that grows past this splits along its ideas (docs/architecture.md)


def test_files_stay_within_the_line_limit():
    root = PACKAGE.parents[1]
    long = {
        str(path.relative_to(root)): count
        for folder in ("src", "tests", "benchmarks")
        for path in sorted((root / folder).rglob("*.py"))
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > LINE_LIMIT
    }
    assert not long, f"files over {LINE_LIMIT} lines (split them along their ideas): {long}"
