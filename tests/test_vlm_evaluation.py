"""minterpr simulate with --vlm-*: the same figures with a failing model as without one, and the cost
per turn reported."""

import json
import random

import pytest
from PIL import Image

from support.helpers import random_attributes
from minterpr.cli.main import main
from minterpr.data.build import mark_dataset
from minterpr.data.formats.gallery import write_gallery
from minterpr.evaluation.online import simulate
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.types import GalleryImage
from minterpr.vlm.config import VLMConfig
from minterpr.vlm.testing import ScriptedServer, reply, status


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("vlm_eval")
    rng = random.Random(5)
    gallery = []
    for pid in range(12):
        attributes = random_attributes(rng, unknown_rate=0.0)
        for view in range(2):
            path = f"p{pid:02d}_{view}.png"
            Image.new("RGB", (8, 16), (pid * 10, 40, 80 + view)).save(root / path)
            gallery.append(GalleryImage(path, f"toy:{pid}", camera_id=f"toy:c{view}", attributes=attributes))
    write_gallery(gallery, root / "gallery_test.jsonl")
    mark_dataset(root)
    return root, gallery


def _simulate(root, tmp_path, name, extra=()):
    out = tmp_path / f"{name}.json"
    code = main(
        [
            "simulate",
            "--backend",
            "attribute",
            "--data",
            str(root),
            "--rounds",
            "2",
            "--limit",
            "6",
            "-q",
            "--json",
            str(out),
            *extra,
        ]
    )
    assert code == 0
    return json.loads(out.read_text())


def test_simulate_with_a_failing_model_gives_todays_figures_and_reports_the_cost(world, tmp_path, capsys):
    root, _ = world
    plain = _simulate(root, tmp_path, "plain")
    with ScriptedServer([status(500)], repeat=True) as server:
        failing = _simulate(
            root,
            tmp_path,
            "failing",
            ["--vlm-url", server.url, "--vlm-model", "m", "--vlm-uses", "reading,asking,anchor,rerank"],
        )
    assert failing["rounds"] == plain["rounds"]
    usage = failing["vlm"]  # extra keys are top-level in the JSON report
    assert 6 <= usage["turns"] <= 6 * 3 and len(usage["per_round"]) == 3
    # each turn fell back once or did not ask the failing endpoint (backing off after a failure: issue 40)
    assert usage["total"]["fallbacks"] + usage["total"]["skipped"] == usage["turns"] and usage["total"]["skipped"]
    assert failing["protocol"]["vlm"]["model"] == "m" and "vlm" not in plain["protocol"]
    assert f"vlm: {usage['turns']} turns" in capsys.readouterr().out


def test_simulate_with_an_answering_model_counts_calls_tokens_and_cache(world):
    root, gallery = world
    backend = AttributeBackend()
    index = backend.index_images(gallery, str(root))
    targets = [gallery[0], gallery[2]]
    with ScriptedServer([reply('{"question": "And the colour of the top?"}')], repeat=True) as server:
        report = simulate(
            backend, index, targets, rounds=2, schedule="questions", vlm=VLMConfig(server.url, "m", uses=("asking",))
        )
    usage = report.extra["vlm"]
    assert usage["total"]["calls"] >= 1 and usage["total"]["tokens"] == 60 * usage["total"]["calls"]
    assert usage["total"]["calls"] + usage["total"]["cached"] == 6  # one question per turn, both sessions


def test_eval_takes_only_the_reading_use(tmp_path, capsys):
    code = main(
        [
            "eval",
            "--run",
            str(tmp_path / "none"),
            "--data",
            str(tmp_path / "d.jsonl"),
            "--vlm-url",
            "http://127.0.0.1:9/v1",
            "--vlm-model",
            "m",
            "--vlm-uses",
            "asking",
        ]
    )
    assert code == 2


def test_simulate_reads_mtg_captions_and_records_them(world, tmp_path):
    from minterpr.vlm.caption import crop_record

    root, gallery = world
    captions = tmp_path / "mtg.jsonl"
    captions.write_text(
        "".join(json.dumps(crop_record(g.path, {"gender": tuple(g.attributes["gender"])})) + "\n" for g in gallery[:6])
    )
    report = _simulate(root, tmp_path, "captioned", ["--vlm-captions", str(captions)])
    assert report["protocol"]["vlm_captions"] == str(captions) and report["protocol"]["vlm_caption_weight"] == 0.5


def test_chat_takes_the_model_options_and_survives_a_failing_endpoint(world, monkeypatch, capsys):
    import io

    root, _ = world
    monkeypatch.setattr("sys.stdin", io.StringIO("hmm, someone in the drizzle\n:quit\n"))
    with ScriptedServer([status(500)], repeat=True) as server:
        code = main(
            [
                "chat",
                "--backend",
                "attribute",
                "--images",
                str(root),
                "--top",
                "2",
                "--vlm-url",
                server.url,
                "--vlm-model",
                "m",
                "--vlm-uses",
                "reading",
                "--vlm-deadline",
                "0.5",
            ]
        )
    assert (
        code == 0 and "  1. " in capsys.readouterr().out and len(server.requests) == 2
    )  # a third try would wait past the 0.5 s deadline
