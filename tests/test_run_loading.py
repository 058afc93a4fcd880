"""One path for a trained run: load_run, its typed extras, and one clear line for every broken run.

Every kind of broken run directory or model file gives a RunError naming the file and what is
wrong (never torch's advice to unpickle with weights_only=False); every command that loads a run
(eval, simulate, chat) prints it as one line and exits 2; a pickle payload never runs.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Callable

import pytest
import torch

from minterpr.cli.main import main
from minterpr.cli.shared.model_options import load_backend
from minterpr.data.synthetic.dataset import SyntheticDatasetConfig, build_synthetic_dataset
from minterpr.data.synthetic.world import SyntheticWorldConfig
from minterpr.errors import RunError
from minterpr.interaction.reranking import RerankConfig
from minterpr.models import create_model, save_model
from minterpr.interaction.fitted import RunExtras
from minterpr.runtime.run import load_run
from minterpr.training.checkpoint import capture_rng_state, load_checkpoint

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Payload:
    """Unpickling this would create the folder ``marker`` (any code could run instead)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (str(self.marker),)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("model") / "model.pt"
    save_model(create_model("tiny"), path, extra={"stage": "dialogue", "epoch": 1})
    return path


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("data")
    world = SyntheticWorldConfig(
        train_identities=2, val_identities=2, test_identities=3, image_size=(64, 32), workers=1
    )
    build_synthetic_dataset(root, SyntheticDatasetConfig(world=world), progress=False)
    return root


def _payload(model_file: Path) -> dict:
    return torch.load(model_file, weights_only=True)


def _with(model_file: Path, tmp: Path, change: Callable[[dict], object]) -> Path:
    payload = _payload(model_file)
    change(payload)
    path = tmp / "run" / "model.pt"
    path.parent.mkdir(parents=True)
    torch.save(payload, path)
    return path


def _training_checkpoint(model_file: Path) -> dict:
    return {
        "format": 1,
        "config": {},
        "model": _payload(model_file)["state_dict"],
        "rng": capture_rng_state(),
        "optimizer": None,
        "scheduler": None,
        "optimizer_stage": 0,
        "global_step": 3,
    }


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _saved(obj: object, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(obj, path)
    return path


def _zip_without_torch(path: Path) -> Path:
    path.parent.mkdir(parents=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("notes.txt", "hello")
    return path


def _unfinished(tmp: Path, model_file: Path) -> Path:
    return _saved(_training_checkpoint(model_file), tmp / "run" / "last.pt").parent


def _checkpoint_given(tmp: Path, model_file: Path) -> Path:
    _write(tmp / "run" / "model.pt", model_file.read_bytes())
    torch.save(_training_checkpoint(model_file), tmp / "run" / "last.pt")
    return tmp / "run" / "last.pt"


def _state(change: Callable[[dict], object]) -> Callable[[dict], object]:
    return lambda payload: change(payload["state_dict"])


# kind -> (make(tmp, model_file) -> the path given, what the message must say, the file it names)
BROKEN = {
    "missing path": (lambda t, m: t / "nothing", "no such run directory or model file", "nothing"),
    "empty directory": (
        lambda t, m: (t / "run").mkdir() or t / "run",
        r"not a training run \(no model.pt, last.pt or best.pt\)",
        "run",
    ),
    "unfinished run": (
        _unfinished,
        r"no model.pt: training did not finish\? `minterpr train --out .* --resume`",
        "run",
    ),
    "only best.pt": (
        lambda t, m: _write(t / "run" / "best.pt", m.read_bytes()).parent,
        "only best.pt: pass that file itself",
        "run",
    ),
    "0-byte file": (lambda t, m: _write(t / "run" / "model.pt", b""), r"empty \(0 bytes\)", "model.pt"),
    "truncated file": (
        lambda t, m: _write(t / "run" / "model.pt", m.read_bytes()[: m.stat().st_size // 2]),
        "truncated",
        "model.pt",
    ),
    "random bytes": (
        lambda t, m: _write(t / "run" / "model.pt", random.Random(0).randbytes(5000)),
        "not a PyTorch file",
        "model.pt",
    ),
    "zip, not torch": (lambda t, m: _zip_without_torch(t / "run" / "model.pt"), "damaged PyTorch file", "model.pt"),
    "pickle payload": (
        lambda t, m: _saved({"x": Payload(t / "pwned")}, t / "run" / "model.pt"),
        r"holds Python objects \(\w+\.mkdir\).*refused to unpickle",
        "model.pt",
    ),
    "foreign torch file": (
        lambda t, m: _saved({"weights": torch.zeros(2)}, t / "o.pt"),
        "not a minterpr retrieval model",
        "o.pt",
    ),
    "a list": (lambda t, m: _saved([1, 2], t / "o.pt"), "holding a list", "o.pt"),
    "training checkpoint given": (_checkpoint_given, r"is a training checkpoint .*: use .*run/model.pt", "last.pt"),
    "no embedded config": (lambda t, m: _with(m, t, lambda p: p.pop("config")), "no embedded model config", "model.pt"),
    "config not a dict": (
        lambda t, m: _with(m, t, lambda p: p.update(config="tiny")),
        "embedded model config is a str",
        "model.pt",
    ),
    "malformed config": (
        lambda t, m: _with(m, t, lambda p: p["config"].update(shoe_size=3)),
        "malformed embedded model config: unknown model config keys ..shoe_size",
        "model.pt",
    ),
    "unknown encoder": (
        lambda t, m: _with(m, t, lambda p: p["config"].update(image_encoder="resnet9000")),
        r"image encoder 'resnet9000', which this installation does not have \(registered: .*tiny_cnn",
        "model.pt",
    ),
    "missing weights": (
        lambda t, m: _with(m, t, _state(lambda s: s.pop("log_logit_scale"))),
        "missing log_logit_scale",
        "model.pt",
    ),
    "unexpected weights": (
        lambda t, m: _with(m, t, _state(lambda s: s.update(extra_layer=torch.ones(1)))),
        "unexpected extra_layer",
        "model.pt",
    ),
    "shape mismatch": (
        lambda t, m: _with(m, t, lambda p: p["config"].update(embed_dim=64)),
        r"another shape: .* saved \(",
        "model.pt",
    ),
    "no state dict": (lambda t, m: _with(m, t, lambda p: p.pop("state_dict")), "no 'state_dict'", "model.pt"),
    "format version": (lambda t, m: _with(m, t, lambda p: p.update(version=7)), "model file version 7", "model.pt"),
    "malformed scoring": (
        lambda t, m: _with(m, t, lambda p: p["extra"].update(scoring={"attribute_weight": -1})),
        "malformed extra 'scoring'",
        "model.pt",
    ),
    "malformed calibration": (
        lambda t, m: _with(
            m,
            t,
            lambda p: p["extra"].update(
                calibration={"split": "val", "temperatures": {"gender": "hot"}, "nll_before": 1, "nll_after": 1}
            ),
        ),
        "malformed extra 'calibration': 'temperatures.gender': 'hot' is not a finite number",
        "model.pt",
    ),
}


@pytest.mark.parametrize("kind", list(BROKEN))
def test_every_broken_run_is_one_clear_run_error(kind, model_file, tmp_path):
    make, reason, named = BROKEN[kind]
    given = make(tmp_path, model_file)
    with pytest.raises(RunError) as caught:
        load_run(given)
    message = str(caught.value)
    assert Path(caught.value.path).name == named and message.startswith(caught.value.path)
    assert caught.value.path.startswith(str(tmp_path))
    assert re.search(reason, message), message
    assert "\n" not in message and "weights_only" not in message and "Traceback" not in message
    assert not (tmp_path / "pwned").exists()  # the payload never ran


CLI_KINDS = [
    "missing path",
    "empty directory",
    "unfinished run",
    "0-byte file",
    "random bytes",
    "pickle payload",
    "training checkpoint given",
    "unknown encoder",
    "shape mismatch",
]


def _command(name: str, run: Path, dataset: Path, tmp: Path) -> list[str]:
    if name == "eval":
        return [
            "eval",
            "--run",
            str(run),
            "--data",
            str(dataset / "test.jsonl"),
            "--json",
            str(tmp / "e.json"),
            "--quiet",
        ]
    if name == "simulate":
        return ["simulate", "--run", str(run), "--data", str(dataset), "--limit", "2", "--rounds", "1"]
    return ["chat", "--run", str(run), "--images", str(dataset)]


@pytest.mark.parametrize("command", ["eval", "simulate", "chat"])
@pytest.mark.parametrize("kind", CLI_KINDS)
def test_commands_report_a_broken_run_in_one_line(kind, command, model_file, dataset, tmp_path, capsys, monkeypatch):
    given = BROKEN[kind][0](tmp_path, model_file)
    monkeypatch.setattr("sys.stdin", open(os.devnull))  # chat reads nothing
    assert main(_command(command, given, dataset, tmp_path)) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"minterpr {command}: error: {tmp_path}"), captured.err
    assert "Traceback" not in captured.err and "weights_only" not in captured.err
    assert not (tmp_path / "pwned").exists()


def test_console_command_prints_no_traceback_for_random_bytes(tmp_path, dataset):
    model = _write(tmp_path / "run" / "model.pt", random.Random(1).randbytes(3000))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "minterpr",
            "eval",
            "--run",
            str(model),
            "--data",
            str(dataset / "test.jsonl"),
            "--json",
            str(tmp_path / "e.json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip() == f"minterpr eval: error: {model}: not a PyTorch file (no zip archive: "
        "random bytes or another format)"
    )


def test_a_pickle_payload_in_last_pt_never_runs_on_resume(tmp_path, capsys):
    from minterpr.training.config import load_config, save_config

    run = tmp_path / "run"
    save_config(load_config("tiny", [f"data.root={tmp_path / 'data'}"]), run / "config.yaml")
    torch.save({"format": 1, "rng": Payload(tmp_path / "pwned")}, run / "last.pt")
    assert main(["train", "--out", str(run), "--resume"]) == 2
    err = capsys.readouterr().err
    assert re.search(r"last.pt: holds Python objects \(\w+\.mkdir\) .*refused to unpickle", err), err
    assert not (tmp_path / "pwned").exists()
    with pytest.raises(RunError, match="refused to unpickle"):
        load_checkpoint(run / "last.pt")
    assert not (tmp_path / "pwned").exists()


def test_an_old_model_without_scoring_or_calibration_loads_with_the_defaults(model_file):
    run = load_run(model_file.parent)
    assert run.model_path == model_file and run.run_dir == model_file.parent
    assert run.extras == RunExtras(other={"stage": "dialogue", "epoch": 1})
    assert run.rerank_config() == RerankConfig() and not run.model.training


def test_the_stored_scoring_reaches_simulate_chat_and_eval(model_file, dataset, tmp_path):
    run = _write(tmp_path / "run" / "model.pt", model_file.read_bytes())
    from minterpr.models import update_extra

    update_extra(run, {"scoring": {"attribute_weight": 0.2, "prob_floor": 0.1}})
    for given in (run, run.parent):  # simulate --run takes a model file like eval and load_pipeline
        args = type("Args", (), {"backend": None, "run": str(given)})()
        backend, extras = load_backend(args)
        scoring = extras.rerank_config()
        assert (scoring.attribute_weight, scoring.prob_floor) == (0.2, 0.1)
    out = tmp_path / "sim.json"
    assert (
        main(
            ["simulate", "--run", str(run), "--data", str(dataset), "--limit", "2", "--rounds", "1", "--json", str(out)]
        )
        == 0
    )
    assert '"prob_floor": 0.1' in out.read_text()
    assert (
        main(
            [
                "eval",
                "--run",
                str(run),
                "--data",
                str(dataset / "test.jsonl"),
                "--json",
                str(tmp_path / "e.json"),
                "--quiet",
            ]
        )
        == 0
    )
    scoring = json.loads((tmp_path / "e.json").read_text())["protocol"]["scoring"]
    assert (scoring["attribute_weight"], scoring["prob_floor"]) == (0.2, 0.1)
