"""``minterpr index build / info`` and ``minterpr chat --index``: embed once, reopen, refuse another model's."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from minterpr.cli.main import main
from minterpr.index.store.gallery_store import MANIFEST, open_gallery
from minterpr.models import create_model, save_model
from minterpr.runtime.run import load_run

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _run(folder: Path, seed: int) -> Path:
    torch.manual_seed(seed)
    save_model(create_model("tiny"), folder / "model.pt", extra={"epoch": 1})
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs")
    return _run(root / "a", 0), _run(root / "b", 1)


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    """Six small generated crops in two folders, and one file that is not an image."""
    root = tmp_path_factory.mktemp("crops")
    rng = np.random.default_rng(0)
    for k in range(6):
        (root / f"part{k % 2}").mkdir(exist_ok=True)
        pixels = (rng.random((64, 32, 3)) * 255).astype(np.uint8)
        Image.fromarray(pixels).save(root / f"part{k % 2}" / f"crop{k}.png")
    (root / "part0" / "broken.jpg").write_bytes(b"not a jpeg")
    return root


@pytest.fixture(scope="module")
def store(runs, images, tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("stores") / "crops"
    stdout = io.StringIO()
    from minterpr.cli.commands import index as cli_index

    args = cli_index_args(
        ["index", "build", "--run", str(runs[0]), "--images", str(images), "--out", str(out), "--camera", "lobby:cam1"]
    )
    assert cli_index.cmd_build(args, stdout) == 0
    return out, stdout.getvalue()


def cli_index_args(argv: list[str]):
    from minterpr.cli.main import build_parser

    return build_parser().parse_args(argv)


def test_build_embeds_skips_and_summarises(store, runs, images):
    out, text = store
    fingerprint = load_run(runs[0]).fingerprint
    assert "indexed 6 images in" in text and f"with model {fingerprint}" in text
    assert "1 of 7 images skipped (unreadable): 'part0/broken.jpg'" in text
    assert f"--index {out}" in text
    stored = open_gallery(out, expected_fingerprint=fingerprint)
    assert len(stored.index) == 6 and stored.index.root == str(images.resolve())
    assert {image.camera_id for image in stored.index.images} == {"lobby:cam1"}
    assert stored.manifest.vector_backend == "exact" and len(stored.vectors) == 6
    # the stored embeddings are the model's: embedding the folder again gives the same rows
    again = load_run(runs[0]).backend().index_images(stored.index.images, root=str(images))
    assert np.allclose(again.embeddings, stored.index.embeddings, atol=1e-5)
    hits = stored.vectors.search(stored.index.embeddings[:1], 2, where={"camera": "lobby:cam1"})
    assert hits.ids[0, 0] == 0  # ids are gallery positions, records carry the camera


def test_info_prints_the_manifest(store, runs, capsys):
    out, _ = store
    assert main(["index", "info", str(out)]) == 0
    text = capsys.readouterr().out
    assert "images: 6 (1 skipped as unreadable)" in text and load_run(runs[0]).fingerprint in text
    assert "vector index: exact (6 vectors" in text and "rebuild: minterpr index build --run" in text
    assert main(["index", "info", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["count"] == 6 and data["vector_index"]["backend"] == "exact"


def test_chat_opens_the_store_without_re_embedding(store, runs, monkeypatch, capsys):
    out, _ = store

    def no_embedding(*args, **kwargs):
        raise AssertionError("chat --index re-embedded the gallery")

    monkeypatch.setattr("minterpr.runtime.neural_backend.NeuralBackend.index_images", no_embedding)
    monkeypatch.setattr("sys.stdin", io.StringIO("a person in a red jacket\n:quit\n"))
    assert main(["chat", "--run", str(runs[0]), "--index", str(out), "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert (
        "  1. part" in text and " match " in text and text.rstrip().endswith("bye")
    )  # the bounded match, as the page shows it


def _one_error_line(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"minterpr {command}: error: "), err
    return err[0]


def test_chat_refuses_another_models_store(store, runs, monkeypatch, capsys):
    out, _ = store
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["chat", "--run", str(runs[1]), "--index", str(out)]) == 2
    line = _one_error_line(capsys, "chat")
    assert (
        f"{out}: built by another model (fingerprint {load_run(runs[0]).fingerprint}, this model's is "
        f"{load_run(runs[1]).fingerprint}); rebuild it with `minterpr index build --run" in line
    )


def test_half_written_store_and_bad_arguments_are_one_line(store, runs, images, tmp_path, monkeypatch, capsys):
    out, _ = store
    half = tmp_path / "half"
    half.mkdir()
    for item in out.iterdir():
        if item.is_file() and item.name != MANIFEST:
            (half / item.name).write_bytes(item.read_bytes())
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["chat", "--run", str(runs[0]), "--index", str(half)]) == 2
    assert "half-written gallery store" in _one_error_line(capsys, "chat")
    assert main(["index", "info", str(half)]) == 2
    assert "half-written gallery store" in _one_error_line(capsys, "index info")
    assert main(["chat", "--backend", "attribute", "--index", str(out)]) == 2
    assert "--index needs --run RUN" in _one_error_line(capsys, "chat")
    assert (
        main(
            [
                "index",
                "build",
                "--run",
                str(runs[0]),
                "--images",
                str(images),
                "--out",
                str(tmp_path / "x"),
                "--backend",
                "annoy",
            ]
        )
        == 2
    )
    assert "--backend 'annoy' is not available here: choose one of" in _one_error_line(capsys, "index build")
    assert not (tmp_path / "x").exists()  # refused before anything was embedded or written
    with pytest.raises(SystemExit):  # argparse: --images and --index are exclusive
        main(["chat", "--run", str(runs[0]), "--index", str(out), "--images", str(images)])


def test_rebuilding_without_a_vector_index_replaces_the_store(runs, images, tmp_path, capsys):
    out = tmp_path / "store"
    base = ["index", "build", "--run", str(runs[0]), "--images", str(images), "--out", str(out)]
    assert main(base) == 0 and (out / "vectors" / "index.json").is_file()
    assert main([*base, "--backend", "none"]) == 0
    assert "(no vector index)" in capsys.readouterr().out
    stored = open_gallery(out)
    assert stored.manifest.vector_backend is None and stored.vectors is None and not (out / "vectors").exists()
    assert stored.manifest.rebuild.endswith(f"--backend none --out {out}")
    assert {image.camera_id for image in stored.index.images} == {None}  # no --camera this time
    assert main(["index", "info", str(out)]) == 0 and "vector index: none" in capsys.readouterr().out
