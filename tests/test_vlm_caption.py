"""MTG at ingestion: captions and evidence per crop, resumable, batched, with progress and cost."""

import json

import pytest

from minterpr.cli.main import main
from minterpr.types import GalleryImage
from minterpr.vlm.caption import caption_gallery, question_groups, read_captions
from minterpr.vlm.client import VLMClient
from minterpr.vlm.config import VLMConfig
from minterpr.vlm.testing import ScriptedServer, reply, status

WOMAN = {"gender": ["female"], "hair_length": ["long"], "upper_colour": ["red"], "lower_type": ["jeans"]}


def answers():
    """One answer per question group, each with that group's slots of WOMAN."""
    out = []
    for _, slots in question_groups():
        out.append(reply(json.dumps({s: WOMAN[s] for s in slots if s in WOMAN})))
    return out


@pytest.fixture
def crops(tmp_path):
    images = [GalleryImage(f"{i}.jpg", f"x:{i}") for i in range(5)]
    for image in images:
        (tmp_path / image.path).write_bytes(b"jpeg" + image.path.encode())
    return images, tmp_path


def test_every_crop_gets_a_caption_and_evidence_with_progress_and_cost(crops):
    images, root = crops
    out = root / "mtg.jsonl"
    seen = []
    with ScriptedServer(answers() * 5) as server:
        client = VLMClient(VLMConfig(server.url, "m"))
        report = caption_gallery(
            images, str(root), client, out, batch_size=2, progress=lambda d, t: seen.append((d, t))
        )
    assert report["captioned"] == 5 and report["usage"]["calls"] == 5 * len(question_groups())
    assert seen == [(2, 5), (4, 5), (5, 5)]
    record = read_captions(out)["3.jpg"]
    assert record["attributes"]["upper_colour"] == ["red"] and record["evidence"]["lower_type"] == {"jeans": 1.0}
    assert "red" in record["caption"] and "jeans" in record["caption"]
    assert server.requests[0]["body"]["messages"][1]["content"][1]["image_url"]["url"].startswith("data:image/jpeg")


def test_a_stopped_run_resumes_where_it_stopped(crops):
    images, root = crops
    out = root / "mtg.jsonl"
    groups = len(question_groups())
    with ScriptedServer(answers() * 5) as server:
        client = VLMClient(VLMConfig(server.url, "m", max_calls=2 * groups + 1))  # the budget stops it in crop 3
        first = caption_gallery(images, str(root), client, out, batch_size=10)
    assert first["stopped"] and first["captioned"] == 2
    with open(out, "a") as f:
        f.write('{"format": "minterpr-vlm-cap')  # and a run killed mid-line
    with ScriptedServer(answers() * 5) as server:
        second = caption_gallery(images, str(root), VLMClient(VLMConfig(server.url, "m")), out, batch_size=10)
    assert second["captioned"] == 3 and second["skipped"] == 2 and len(read_captions(out)) == 5


def test_a_failing_endpoint_stores_nothing_for_the_crop(crops):
    images, root = crops
    out = root / "mtg.jsonl"
    with ScriptedServer([status(400)], repeat=True) as server:
        report = caption_gallery(images[:1], str(root), VLMClient(VLMConfig(server.url, "m", json_schema=False)), out)
    assert report["failed"] == 1 and read_captions(out) == {}


def test_the_cli_captions_a_manifest(crops, capsys):
    images, root = crops
    manifest = root / "gallery.jsonl"
    manifest.write_text("".join(json.dumps({"path": i.path, "person_id": i.person_id}) + "\n" for i in images))
    with ScriptedServer(answers() * 5) as server:
        code = main(
            [
                "vlm",
                "caption",
                "--gallery",
                str(manifest),
                "--out",
                str(root / "mtg.jsonl"),
                "--vlm-url",
                server.url,
                "--vlm-model",
                "m",
                "-q",
            ]
        )
    assert code == 0 and "captioned 5 crops" in capsys.readouterr().out


def test_the_cli_needs_an_endpoint(crops, capsys):
    images, root = crops
    assert main(["vlm", "caption", "--gallery", str(root / "g.jsonl"), "--out", str(root / "o.jsonl")]) == 2
    assert "--vlm-url" in capsys.readouterr().err


def test_the_captions_evidence_ranks_a_captioned_crop_in_a_search(tmp_path):
    import numpy as np

    from minterpr.index.gallery_index import GalleryIndex
    from minterpr.interaction.session import Session
    from minterpr.vlm.caption import crop_record, with_caption_evidence

    images = [GalleryImage(f"{i}.jpg", f"x:{i}") for i in range(4)]
    index = GalleryIndex(images, np.eye(4, dtype=np.float32))  # no attribute evidence at all

    class Cosine:  # a backend whose query says nothing (every image scores the same)
        def encode_turns(self, turns, index):
            return np.full((len(turns), 4), 0.5, dtype=np.float32)

    plain = Session(Cosine(), index, shortlist=None).describe("a woman in a red top")
    captioned = with_caption_evidence(
        index, {"2.jpg": crop_record("2.jpg", {"gender": ("female",), "upper_colour": ("red",)})}
    )
    step = Session(Cosine(), captioned, shortlist=None).describe("a woman in a red top")
    assert int(step.ranking[0]) == 2 and float(np.ptp(plain.scores)) == 0.0
    with pytest.raises(ValueError, match="0..1"):
        with_caption_evidence(index, {}, weight=1.5)
