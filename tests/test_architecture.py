"""Imports flow one way (types/registry -> language -> data -> models -> index -> vlm -> interaction -> evaluation
-> runtime -> training -> ingest -> serving -> cli) and the core never imports torch or optional packages."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "minterpr"
LAYERS = ["types", "registry", "language", "data", "models", "index", "vlm", "interaction", "evaluation", "runtime",
          "trained_run", "training", "ingest", "serving", "cli"]
RANK = {"types": 0, "registry": 0, "errors": 0, "fileio": 0, **{name: i for i, name in enumerate(LAYERS)}}
HEAVY = {"torch", "transformers", "scipy", "matplotlib", "cv2", "sentence_transformers"}


# The metrics are plain numpy with no minterpr imports: training validates with them, so they
# sit with the data layer.
MODULE_RANK = {"minterpr.evaluation.metrics": RANK["data"], "minterpr.evaluation.attribute_metrics": RANK["data"]}


def _rank_of(module: str) -> int | None:
    if module in MODULE_RANK:
        return MODULE_RANK[module]
    layer = _layer(module)
    return RANK.get(layer) if layer else None


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "minterpr" and len(parts) > 1 else None


def _imports(path: Path, top_level_only: bool):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).with_suffix("")
        if relative.parts[0] in ("__init__", "__main__"):
            continue
        yield path, relative.parts[0]


@pytest.mark.parametrize("path, layer", list(_modules()), ids=lambda v: str(v).rsplit("src/", 1)[-1])
def test_imports_flow_one_way(path, layer):
    own = "minterpr." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
    own_rank = _rank_of(own)
    for module in _imports(path, top_level_only=False):
        target = _rank_of(module)
        if target is not None and own_rank is not None:
            assert target <= own_rank, f"{path.name} ({layer}) imports {module}"


@pytest.mark.parametrize("path, layer", [(p, l) for p, l in _modules() if l in ("types", "registry", "errors", "fileio", "language", "data")],
                         ids=lambda v: str(v).rsplit("src/", 1)[-1])
def test_core_imports_no_heavy_package_at_import_time(path, layer):
    heavy = {m for m in _imports(path, top_level_only=True) if m.split(".")[0] in HEAVY}
    assert not heavy, f"{path.name} imports {heavy} at module level"


def test_importing_the_package_and_its_data_layer_loads_no_torch():
    code = ("import sys, minterpr, minterpr.data.formats, minterpr.data.dialogue_synthesis, minterpr.index, "
            "minterpr.evaluation.metrics; print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
