"""The options every command shares (minterpr.cli.shared.common): --verbose/--quiet and logging,
--device on the commands that run a model, --json PATH|- for JSON reports."""

from __future__ import annotations

import argparse
import json
import logging
import random

import pytest
from PIL import Image

from support.helpers import random_attributes
from minterpr.cli.shared.common import LOGGER_NAME, add_common_options
from minterpr.cli.main import build_parser, main
from minterpr.data.build import mark_dataset
from minterpr.data.formats.gallery import write_gallery
from minterpr.data.formats.minterpedes import write_minterpedes
from minterpr.types import Dialogue, GalleryImage, QATurn, RetrievalSample

COMMANDS = {
    "demo",
    "data validate",
    "data stats",
    "data synth",
    "data peta",
    "data pa100k",
    "data mark",
    "data show",
    "data convert",
    "data reid",
    "simulate",
    "chat",
    "index build",
    "index info",
    "index fused",
    "train",
    "eval",
    "eval-attributes",
    "eval-reid",
    "calibrate match",
    "calibrate presence",
    "calibrate slots",
    "calibrate appearance",
    "calibrate-match",
    "calibrate-presence",
    "export",
    "models export",
    "adapt",
    "serve",
    "users add",
    "users list",
    "users passwd",
    "audit verify",
    "audit export",
    "audit head",
    "ingest",
    "vlm caption",
    "models list",
    "models fetch",
    "models publish-appearance",
    "models quantize",
    "db current",
    "db upgrade",
    "db backup",
    "db restore",
}
MODEL_COMMANDS = {
    "demo",
    "simulate",
    "chat",
    "index build",
    "train",
    "eval",
    "eval-attributes",
    "eval-reid",
    "calibrate match",
    "calibrate presence",
    "calibrate slots",
    "calibrate appearance",
    "calibrate-match",
    "calibrate-presence",
    "adapt",
    "serve",
    "ingest",
}
JSON_COMMANDS = {
    "demo",
    "data stats",
    "data peta",
    "simulate",
    "index info",
    "eval",
    "eval-attributes",
    "eval-reid",
    "calibrate match",
    "calibrate presence",
    "calibrate slots",
    "calibrate appearance",
    "calibrate-match",
    "calibrate-presence",
    "adapt",
    "users list",
    "audit verify",
    "audit export",
    "audit head",
    "ingest",
    "vlm caption",
    "models list",
    "models fetch",
    "models publish-appearance",
    "models quantize",
}


def _leaves(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
                    yield from _leaves(sub, (*prefix, name))
                else:
                    yield " ".join((*prefix, name)), sub


LEAVES = dict(_leaves(build_parser()))


def _minimal_argv(name: str, parser: argparse.ArgumentParser) -> list[str]:
    """The command with a value for each required argument (parsing only: nothing runs)."""
    argv = name.split()
    required_groups = [g._group_actions[0] for g in parser._mutually_exclusive_groups if g.required]
    for action in parser._actions:
        value = str(action.choices[0] if action.choices else 1) if not isinstance(action.choices, dict) else "1"
        if not action.option_strings and action.dest != "help":
            argv.append(value)
        elif action.required or action in required_groups:
            argv += [action.option_strings[0], value]
    return argv


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def test_the_commands_checked_are_all_the_commands():
    assert set(LEAVES) == COMMANDS  # a new command is noticed here and given the common options


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_accepts_verbose_and_quiet(name):
    parser = build_parser()
    argv = _minimal_argv(name, LEAVES[name])
    assert parser.parse_args(argv).quiet is False and parser.parse_args(argv).verbose is False
    assert parser.parse_args([*argv, "--quiet"]).quiet is True
    assert parser.parse_args([*argv, "-v"]).verbose is True
    with pytest.raises(SystemExit):
        parser.parse_args([*argv, "--quiet", "--verbose"])  # one or the other
    assert getattr(parser.parse_args(argv).handler, "_common_options", False)  # configures logging first


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_device_on_model_commands_and_json_on_report_commands(name):
    options = _options(LEAVES[name])
    assert ("--device" in options) == (name in MODEL_COMMANDS)
    assert ("--json" in options) == (name in JSON_COMMANDS)
    if name in JSON_COMMANDS:
        argv = _minimal_argv(name, LEAVES[name])
        assert build_parser().parse_args([*argv, "--json"]).json == "-"  # no value: stdout
        assert build_parser().parse_args([*argv, "--json", "out.json"]).json == "out.json"
        assert build_parser().parse_args(argv).json is None


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_torch_threads_wherever_a_model_runs(name):
    options = _options(LEAVES[name])
    assert ("--torch-threads" in options) == (name in MODEL_COMMANDS)  # serve: its own, a setting
    if name in MODEL_COMMANDS and name != "serve":
        argv = _minimal_argv(name, LEAVES[name])
        assert build_parser().parse_args([*argv, "--torch-threads", "1"]).torch_threads == 1
        assert build_parser().parse_args(argv).torch_threads is None


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_torch_threads_refuses_what_is_not_a_count(value, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["eval-reid", "--model", "m", "--data", "d", "--torch-threads", value])
    assert f"expected a whole number >= 1, got {value if value != 'two' else repr(value)}" in capsys.readouterr().err


def test_torch_threads_refuses_a_count_that_would_crash_torch(capsys):
    with pytest.raises(SystemExit):  # 100,000 segfaulted torch at its first matmul
        build_parser().parse_args(["eval-reid", "--model", "m", "--data", "d", "--torch-threads", "100000"])
    assert "expected at most 4096 threads, got 100000" in capsys.readouterr().err
    argv = ["eval-reid", "--model", "m", "--data", "d", "--torch-threads", "4096"]
    assert build_parser().parse_args(argv).torch_threads == 4096  # the service's bound, accepted


def test_serve_keeps_its_own_torch_threads_setting_and_its_message(capsys):
    # serve's --torch-threads is a validated service setting: 0 is its one line, not torch's traceback
    assert main(["serve", "--demo", "--torch-threads", "0"]) == 2
    assert "torch_threads (command line) must be a number within 1..4096, got 0" in capsys.readouterr().err


def test_torch_threads_sets_torch_before_the_handler_runs():
    import torch

    seen = []
    parser = argparse.ArgumentParser(prog="minterpr toy")
    parser.set_defaults(handler=lambda args: seen.append(torch.get_num_threads()) or 0)
    add_common_options(parser, device=True)
    before = torch.get_num_threads()
    try:
        args = parser.parse_args(["--torch-threads", "1"])
        assert args.handler(args) == 0 and seen == [1]
        args = parser.parse_args([])  # not given: torch's own is left as it is
        torch.set_num_threads(before)
        assert args.handler(args) == 0 and seen[-1] == before
    finally:
        torch.set_num_threads(before)


def test_add_common_options_needs_the_handler_first():
    with pytest.raises(ValueError, match="set_defaults"):
        add_common_options(argparse.ArgumentParser(prog="x"))


@pytest.mark.parametrize(
    "flag, level", [("--quiet", logging.WARNING), (None, logging.INFO), ("--verbose", logging.DEBUG)]
)
def test_verbosity_sets_the_minterpr_logger(flag, level, tmp_path, capsys):
    assert main(["data", "mark", str(tmp_path / "absent"), *([flag] if flag else [])]) == 2
    assert logging.getLogger(LOGGER_NAME).level == level
    logging.getLogger("minterpr.test").debug("a debug line")
    logging.getLogger("minterpr.test").info("an info line")
    err = capsys.readouterr().err
    assert ("an info line" in err) == (level <= logging.INFO) and ("a debug line" in err) == (level <= logging.DEBUG)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A finished dataset: 12 identities x 2 images on disk, attributes, 4 recorded dialogues."""
    root = tmp_path_factory.mktemp("conventions")
    rng = random.Random(1)
    gallery = []
    for pid in range(12):
        attributes = random_attributes(rng, unknown_rate=0.0)
        for view in range(2):
            Image.new("RGB", (16, 32), (20 * pid, 100, 60 * view)).save(root / f"p{pid}_{view}.png")
            gallery.append(GalleryImage(f"p{pid}_{view}.png", f"toy:{pid}", attributes=attributes))
    write_gallery(gallery, root / "gallery_test.jsonl")
    write_minterpedes(
        [
            RetrievalSample(f"p{k}_0.png", f"minterpedes:{k}", Dialogue(f"person {k}", (QATurn("Bag?", "no"),)))
            for k in range(4)
        ],
        root / "test.jsonl",
    )
    mark_dataset(root)
    return root


def test_simulate_json_to_stdout_is_the_report_alone(world, capsys):
    assert main(["simulate", "--backend", "attribute", "--data", str(world), "--rounds", "1", "--json", "-"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert [row["round"] for row in report["rounds"]] == [0, 1]
    assert "R@1" in captured.err and "mean turns to rank 1" in captured.err  # the table went to stderr


def test_status_lines_are_logged_and_quiet_keeps_the_results(world, tmp_path, capsys):
    out = tmp_path / "sim.json"
    args = ["simulate", "--backend", "attribute", "--data", str(world), "--rounds", "1", "--json", str(out)]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "R@1" in captured.out and f"wrote {out}" in captured.err and f"wrote {out}" not in captured.out
    assert main([*args, "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "R@1" in captured.out and "wrote" not in captured.err  # results stay, diagnostics go
    assert json.loads(out.read_text())["rounds"]


def test_data_stats_json_to_stdout(world, capsys):
    assert main(["data", "stats", str(world / "test.jsonl"), "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["format"] == "minterpedes" and captured.err.strip()


def test_eval_json_dash_prints_valid_json_only_and_json_is_optional(
    world, tiny_run, tmp_path, capsys, one_torch_thread
):
    base = ["eval", "--run", str(tiny_run), "--data", str(world / "test.jsonl")]
    assert main([*base, "--json", "-"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)  # stdout holds the JSON and nothing else
    assert report["protocol"]["num_queries"] == 4 and len(report["rounds"]) == 2
    assert any(line.split()[:2] == ["round", "R@1"] for line in captured.err.splitlines())  # the table: stderr
    assert main([*base, "--quiet", "--pictures", "2", "--pictures-dir", str(tmp_path / "strips")]) == 0  # no --json
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0].split()[:2] == ["round", "R@1"] and not captured.err
    assert len(list((tmp_path / "strips").glob("query_*.png"))) == 2


@pytest.mark.parametrize("command", ["eval", "eval-attributes", "simulate", "chat", "index build", "adapt", "ingest"])
def test_device_reaches_the_model(command, world, tiny_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", open("/dev/null"))
    run, data = str(tiny_run), str(world)
    argv = {
        "eval": ["eval", "--run", run, "--data", f"{data}/test.jsonl"],
        "eval-attributes": ["eval-attributes", "--run", run, "--gallery", f"{data}/gallery_test.jsonl"],
        "simulate": ["simulate", "--run", run, "--data", data],
        "chat": ["chat", "--run", run, "--images", data],
        "index build": ["index", "build", "--run", run, "--images", data, "--out", str(tmp_path / "store")],
        "adapt": ["adapt", "--run", run, "--images", data, "--out", str(tmp_path / "adapted")],
        "ingest": ["ingest", data, "--gallery", str(tmp_path / "gallery"), "--run", run],
    }[command]
    assert main([*argv, "--device", "no-such-device"]) == 2
    assert "no-such-device" in capsys.readouterr().err


def test_train_device_and_quiet_are_config_overrides(tmp_path, capsys):
    from minterpr.cli.commands.train import train_config

    args = argparse.Namespace(
        config="tiny", set=["progress=true"], out=str(tmp_path), resume=False, data=None, device="cuda:1", quiet=True
    )
    cfg = train_config(args)
    assert cfg.device == "cuda:1" and cfg.progress is False
    args = argparse.Namespace(
        config="tiny", set=["progress=false"], out=str(tmp_path), resume=False, data=None, device=None, quiet=False
    )
    cfg = train_config(args)
    assert cfg.device == "cpu" and cfg.progress is False  # --set progress=false still works
    assert main(["train", "--config", "tiny", "--out", str(tmp_path / "r"), "--device", "tpu"]) == 2
    assert "device" in capsys.readouterr().err


def test_users_and_audit_write_their_records_as_json(tmp_path, capsys, monkeypatch):
    """users list / audit export / head / verify with --json -: one JSON record on stdout, the
    usual lines on stderr; the heads they report agree; --quiet keeps the results."""
    import io

    pytest.importorskip("sqlalchemy")
    state = str(tmp_path / "state")
    monkeypatch.setattr("sys.stdin", io.StringIO("a long enough passphrase 42\n"))
    assert main(["users", "add", "ana", "--role", "analyst", "--data", state, "--quiet"]) == 0
    assert "user 'ana' (analyst) created" in capsys.readouterr().out
    assert main(["users", "list", "--data", state, "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == [{"username": "ana", "role": "analyst", "disabled": False}]
    assert captured.err.splitlines() == ["ana\tanalyst"]  # the table, moved off stdout
    log = tmp_path / "audit.jsonl"
    assert main(["audit", "export", "--data", state, "--out", str(log), "--json", "-"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported["file"] == str(log) and exported["entries"] == len(log.read_text().splitlines()) >= 2
    assert main(["audit", "head", "--data", state, "--json", "-", "-q"]) == 0
    head = json.loads(capsys.readouterr().out)
    assert head == {"seq": exported["entries"], "head": exported["head"]}
    report_path = tmp_path / "verify.json"
    assert main(["audit", "verify", str(log), "--head", head["head"], "--json", str(report_path)]) == 0
    assert "intact" in capsys.readouterr().out  # --json PATH: the lines stay on stdout
    assert json.loads(report_path.read_text()) == {
        "file": str(log),
        "entries": exported["entries"],
        "head": head["head"],
        "expected_head": head["head"],
        "ok": True,
        "problems": [],
    }
    log.write_text("".join(log.read_text().splitlines(keepends=True)[1:]))  # the first entry removed
    assert main(["audit", "verify", str(log), "--json", "-"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["problems"] and report["entries"] == exported["entries"] - 1
