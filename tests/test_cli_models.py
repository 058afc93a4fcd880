"""``minterpr models``: its subcommands (``list``, the default when the first word names none;
``fetch``; ``publish-appearance``; ``export``), each taking its own options and refusing another's;
``minterpr export``, the earlier name of ``models export``, kept as an alias that says so."""

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
    "export": (
        ["runs/synth"],
        ["--out", "models/synth", "--self-contained", "--precision", "float16", "--push-to-hub", "lab/synth"]
        + ["--revision", "v1", "--private", "--commit-message", "first"],
    ),
}
FLAGS = {"--no-fingerprints", "--self-contained", "--private"}  # the options that take no value


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
        (["export", "runs/synth", "--out", "models/synth"], "export"),
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
    positionals, own = OWN[command]
    for option in (word for word in OWN[other][1] if word.startswith("--") and word not in own):
        with pytest.raises(SystemExit) as exited:
            parse("models", command, *positionals, option, *([] if option in FLAGS else ["x"]))
        assert exited.value.code == 2
        assert f"unrecognized arguments: {option}" in capsys.readouterr().err


def test_fetch_and_publish_need_their_one_argument(capsys):
    for command in ("fetch", "publish-appearance", "export"):
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


def test_export_is_an_alias_of_models_export_left_out_of_the_help():
    assert vars(parse("export", *OWN["export"][0], *OWN["export"][1])).keys() == vars(
        parse("models", "export", *OWN["export"][0], *OWN["export"][1])
    ).keys() - {"models_command", "group_parser", "default_subcommand"}
    listed = [line.split()[0] for line in build_parser().format_help().splitlines() if line.startswith("    ")]
    assert "models" in listed and "export" not in listed  # the alias runs, unlisted


def test_the_alias_says_it_is_now_models_export(tmp_path, capsys):
    assert main(["export", str(tmp_path / "run")]) == 2  # no --out: refused before any work, as models export
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "minterpr export is now minterpr models export" and "--out DIR is required" in err[1]
    assert main(["models", "export", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("minterpr models export: error: --out DIR is required")
