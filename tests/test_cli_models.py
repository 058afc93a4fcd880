"""``minterpr models``: its subcommands (``list``, the default when the first word names none;
``fetch``; ``publish-appearance``), each taking its own options and refusing another's."""

from __future__ import annotations

import argparse

import pytest

from minterpr.cli.main import build_parser, main, with_default_subcommand
from minterpr.models.zoo import MODELS_ENV

OWN = {  # each subcommand's words: its positionals, then every option of its own
    "list": ([], ["--no-fingerprints"]),
    "fetch": (["yolox-nano"], ["--from", "copy.onnx", "--sha256", "ab" * 32]),
    "publish-appearance": (
        ["best.pt"],
        ["--name", "looks", "--summary", "a test", "--check", "val.jsonl", "--precision", "float16"],
    ),
}


def parse(*argv: str) -> argparse.Namespace:
    parser = build_parser()
    return parser.parse_args(with_default_subcommand(parser, argv))


@pytest.mark.parametrize(
    "argv, command",
    [
        ([], "list"),
        (["runs/"], "list"),
        (["runs/", "--json", "models.json"], "list"),
        (["--no-fingerprints"], "list"),
        (["list", "runs/"], "list"),
        (["fetch", "yolox-nano"], "fetch"),
        (["publish-appearance", "best.pt"], "publish-appearance"),
    ],
)
def test_the_first_word_chooses_the_subcommand_and_list_is_the_default(argv, command):
    assert parse("models", *argv).models_command == command


def test_list_takes_the_folders_and_its_options():
    args = parse("models", "runs/", "outputs/demo", "--json", "models.json", "--no-fingerprints")
    assert (args.roots, args.json, args.no_fingerprints) == (["runs/", "outputs/demo"], "models.json", True)
    assert parse("models").roots == []


@pytest.mark.parametrize("command", sorted(OWN))
def test_each_subcommand_parses_its_own_options(command):
    positionals, options = OWN[command]
    args = parse("models", command, *positionals, *options)
    assert args.models_command == command and args.handler is not None


@pytest.mark.parametrize("command, other", [(c, o) for c in sorted(OWN) for o in sorted(OWN) if o != c])
def test_each_subcommand_refuses_another_ones_options(command, other, capsys):
    positionals, _ = OWN[command]
    for option in (word for word in OWN[other][1] if word.startswith("--")):
        with pytest.raises(SystemExit) as exited:
            parse("models", command, *positionals, option, *(["x"] if option != "--no-fingerprints" else []))
        assert exited.value.code == 2
        assert f"unrecognized arguments: {option}" in capsys.readouterr().err


def test_fetch_and_publish_need_their_one_argument(capsys):
    for command in ("fetch", "publish-appearance"):
        with pytest.raises(SystemExit):
            parse("models", command)
        assert "required" in capsys.readouterr().err


def test_models_help_lists_the_subcommands(capsys):
    with pytest.raises(SystemExit) as exited:
        parse("models", "--help")
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert all(name in out for name in OWN)


@pytest.mark.parametrize("argv", [["models"], ["models", "FOLDER"], ["models", "list", "FOLDER", "--json", "-"]])
def test_models_with_no_words_or_a_folder_lists(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(MODELS_ENV, str(tmp_path / "no-zoo"))  # no shipped models: nothing to load
    monkeypatch.chdir(tmp_path)  # none of the default folders
    (tmp_path / "FOLDER").mkdir()
    assert main(argv) == 0
    captured = capsys.readouterr()
    lines = captured.err if "--json" in argv else captured.out  # --json -: the JSON alone on stdout
    assert "no models found" in lines and "detector  yolox-nano" in lines
