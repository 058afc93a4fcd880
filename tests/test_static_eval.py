"""Static evaluation: round replay rules, protocol, and the eval command's JSON, table and plot."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from minterpr.cli.main import main
from minterpr.data.formats.gallery import write_gallery
from minterpr.data.formats.minterpedes import write_minterpedes
from minterpr.evaluation.dialogue_metrics import per_round_metrics
from minterpr.evaluation.report import PERCENT_KEYS, EvaluationReport
from minterpr.evaluation.static import dialogue_turns, evaluate_dialogues, gallery_from_samples
from minterpr.index.gallery_index import GalleryIndex
from minterpr.types import DescriptionTurn, Dialogue, GalleryImage, QATurn, ReferenceTurn, RetrievalSample

# 3 people, 2 images each; the toy backend embeds person k's images at axis k
GALLERY = [GalleryImage(f"p{k}_{v}.png", f"toy:{k}") for k in range(3) for v in range(2)]


class AxisBackend:
    """Embeds an image by the person in its file name and a turn by the digit its text ends with."""

    def __init__(self) -> None:
        self.indexed = 0

    def index_images(self, images, root=None, *, progress=False):
        self.indexed += 1
        emb = np.zeros((len(images), 3), np.float32)
        for i, image in enumerate(images):
            emb[i, int(image.path[1])] = 1.0 - 0.01 * int(image.path[3])  # view 0 ranks before view 1
        return GalleryIndex(list(images), emb, root=root)

    def encode_turns(self, turns, index):
        out = np.zeros((len(turns), 3), np.float32)
        for r, turn in enumerate(turns):
            text = turn.text if isinstance(turn, DescriptionTurn) else getattr(turn, "answer", None) or turn.feedback
            out[r, int(text[-1])] = 1.0
        return out


def sample(target: str, pid: int, description_digit: int, answers: list[int]) -> RetrievalSample:
    qa = tuple(QATurn("which one?", f"number {a}") for a in answers)
    return RetrievalSample(target, f"minterpedes:{pid}", Dialogue(f"person {description_digit}", qa))


def test_rounds_ended_dialogues_keep_their_last_query():
    samples = [
        sample("p0_0.png", 0, 1, [2, 0]),  # wrong, wrong, right: rank 1 only at round 2
        sample("p1_0.png", 1, 1, []),
    ]  # right at once, and ended after round 0
    report = evaluate_dialogues(AxisBackend(), samples, GALLERY, None, {"dataset": "toy", "split": "test"})
    assert [row["r1"] for row in report.rounds] == [50.0, 50.0, 100.0]  # the 1-round dialogue stays right
    assert [row["hits1"] for row in report.rounds] == [50.0, 50.0, 100.0]
    assert report.protocol["ended_dialogues"] == "keep_last_query"
    assert report.protocol["num_queries"] == 2 and report.protocol["num_gallery"] == 6
    assert report.protocol["num_rounds"] == 3 and report.protocol["dataset"] == "toy"
    # the same numbers straight from the metrics on hand-made per-round queries
    axis = np.eye(3, dtype=np.float32)
    gallery = AxisBackend().index_images(GALLERY).embeddings
    rounds = [
        (np.stack([axis[1], axis[1]]), gallery),
        (np.stack([axis[2], axis[1]]), gallery),
        (np.stack([axis[0], axis[1]]), gallery),
    ]
    expected = per_round_metrics(rounds, ["toy:0", "toy:1"], [g.person_id for g in GALLERY])
    assert report.rounds == expected["rounds"] and report.bri == pytest.approx(expected["bri"])


def test_max_rounds_and_description_only():
    samples = [sample("p0_0.png", 0, 1, [2, 0])]
    assert len(evaluate_dialogues(AxisBackend(), samples, GALLERY, None, max_rounds=2).rounds) == 2
    flat = evaluate_dialogues(AxisBackend(), samples, GALLERY, None, description_only=True)
    assert [row["r1"] for row in flat.rounds] == [0.0, 0.0, 0.0]  # as many rounds, description alone
    assert flat.protocol["queries"] == "description_only"
    assert [type(t).__name__ for t in dialogue_turns(samples[0], description_only=True)] == ["DescriptionTurn"]
    with pytest.raises(ValueError, match="max_rounds"):
        evaluate_dialogues(AxisBackend(), samples, GALLERY, None, max_rounds=0)


def test_identity_comes_from_the_gallery_manifest():
    # the dialogue says "minterpedes:9" but the manifest says the target image shows toy:0
    report = evaluate_dialogues(AxisBackend(), [sample("p0_0.png", 9, 0, [])], GALLERY, None)
    assert report.rounds[0]["r1"] == 100.0


def test_gallery_from_samples_adds_unlabelled_references():
    refs = (ReferenceTurn("b.png", "no"), ReferenceTurn("a.png", "yes"))
    s = RetrievalSample("a.png", "x:1", Dialogue("d", (), refs))
    t = RetrievalSample("b.png", "x:2", Dialogue("e"))
    pairs = [(g.path, g.person_id) for g in gallery_from_samples([s])]
    assert pairs == [("a.png", "x:1"), ("b.png", "unlabelled:b.png")]
    assert [g.person_id for g in gallery_from_samples([s, t])] == ["x:1", "x:2"]  # a target's id wins


@pytest.fixture(scope="module")
def eval_setup(tmp_path_factory):
    """A tiny (untrained) model saved as a run, and a test split with its manifest."""
    from minterpr.models import create_model, save_model

    root = tmp_path_factory.mktemp("eval_data")
    colours = [(200, 30, 30), (30, 60, 200), (30, 160, 60), (230, 210, 40)]
    gallery = []
    for k, colour in enumerate(colours):
        for v in range(2):
            Image.new("RGB", (32, 64), tuple(max(0, c - 40 * v) for c in colour)).save(root / f"p{k}_{v}.png")
            gallery.append(GalleryImage(f"p{k}_{v}.png", f"toy:{k}"))
    samples = [
        RetrievalSample(
            f"p{k}_0.png",
            f"minterpedes:{k}",
            Dialogue(
                f"a person in colour {k}",
                tuple(QATurn("Bag?", "no") for _ in range(k)),
                (ReferenceTurn(f"p{(k + 1) % 4}_1.png", "not this one"),) if k % 2 else (),
            ),
        )
        for k in range(4)
    ]
    write_gallery(gallery, root / "gallery_test.jsonl")
    write_minterpedes(samples, root / "test.jsonl")
    run = tmp_path_factory.mktemp("run")
    save_model(create_model("tiny"), run / "model.pt", extra={"stage": "dialogue", "epoch": 2})
    return root, run


def test_eval_command_writes_json_table_and_plot(eval_setup, tmp_path, capsys):
    root, run = eval_setup
    out, plot = tmp_path / "eval.json", tmp_path / "r1.png"
    code = main(
        [
            "eval",
            "--run",
            str(run),
            "--data",
            str(root / "test.jsonl"),
            "--image-root",
            str(root),
            "--json",
            str(out),
            "--plot",
            str(plot),
            "--quiet",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0].split()[:3] == ["round", "R@1", "R@5"] and "BRI:" in printed
    report = EvaluationReport.load(out)
    data = json.loads(out.read_text())
    assert set(data) >= {"protocol", "rounds", "bri", "num_queries"}
    assert len(report.rounds) == 5  # the longest dialogue: description + 3 Q&A + 1 reference
    assert all(key in row for row in report.rounds for key in PERCENT_KEYS)
    protocol = report.protocol
    assert protocol["split"] == "test" and protocol["gallery"].endswith("gallery_test.jsonl")
    assert protocol["num_queries"] == 4 and protocol["num_gallery"] == 8
    assert protocol["image_encoder"] == "tiny_cnn" and protocol["selected"] == {"stage": "dialogue", "epoch": 2}
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_eval_command_without_manifest_and_with_max_rounds(eval_setup, tmp_path):
    root, run = eval_setup
    lone = tmp_path / "dialogues.jsonl"
    lone.write_text((root / "test.jsonl").read_text())  # no gallery_dialogues.jsonl beside it
    out = tmp_path / "eval.json"
    assert (
        main(
            [
                "eval",
                "--run",
                str(run),
                "--data",
                str(lone),
                "--image-root",
                str(root),
                "--json",
                str(out),
                "--max-rounds",
                "2",
                "--quiet",
            ]
        )
        == 0
    )
    report = EvaluationReport.load(out)
    assert len(report.rounds) == 2 and report.protocol["gallery"] == "targets+references"
    assert report.protocol["num_gallery"] == 4 + 2  # 4 targets + 2 references that are nobody's target


def test_eval_command_with_int8_text_records_it(eval_setup, tmp_path):
    pytest.importorskip("onnxruntime.quantization")
    root, run = eval_setup
    fp32, int8 = tmp_path / "fp32.json", tmp_path / "int8.json"
    base = ["eval", "--run", str(run), "--data", str(root / "test.jsonl"), "--image-root", str(root), "--quiet"]
    assert main([*base, "--json", str(fp32)]) == 0
    assert main([*base, "--json", str(int8), "--text-precision", "int8"]) == 0
    reports = EvaluationReport.load(fp32), EvaluationReport.load(int8)
    assert "text_precision" not in reports[0].protocol and reports[1].protocol["text_precision"] == "int8"
    assert len(reports[1].rounds) == len(reports[0].rounds)


def test_simulate_refuses_int8_text_without_a_model(eval_setup, capsys):
    root, _ = eval_setup
    assert main(["simulate", "--backend", "attribute", "--data", str(root), "--text-precision", "int8", "--quiet"]) == 2
    assert "--text-precision needs --run" in capsys.readouterr().err


def test_eval_command_reports_a_missing_model(eval_setup, tmp_path, capsys):
    root, _ = eval_setup
    args = ["eval", "--run", str(tmp_path), "--data", str(root / "test.jsonl"), "--json", str(tmp_path / "x.json")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "no model.pt" in err and "minterpr train" in err  # names the missing file and the fix


# ------------------------------------------------------------------------ rejected references
def _rejecting_sample(feedback: str) -> RetrievalSample:
    # the description points at person 1 (wrong); the user then rejects p1_0, the image shown
    return RetrievalSample("p0_0.png", "toy:0", Dialogue("person 1", (), (ReferenceTurn("p1_0.png", feedback + " 1"),)))


def test_a_rejected_reference_ranks_below_the_images_not_rejected():
    from minterpr.interaction.reranking import RerankConfig
    from minterpr.evaluation.static import replay_scores

    # only the rejected image and the target compete; the feedback still points at person 1
    gallery = [GalleryImage("p0_0.png", "toy:0"), GalleryImage("p1_0.png", "toy:1")]
    samples = [_rejecting_sample("That's not the person. Shorter hair, number")]
    on = evaluate_dialogues(AxisBackend(), samples, gallery, None)
    off = evaluate_dialogues(AxisBackend(), samples, gallery, None, reranking=RerankConfig(rejection=False))
    assert on.protocol["scoring"]["rejection"] and not off.protocol["scoring"]["rejection"]
    assert [r["r1"] for r in on.rounds] == [0.0, 100.0]  # from the round it was rejected on
    assert [r["r1"] for r in off.rounds] == [0.0, 0.0]
    # as in a session, the rejected image's near-duplicate (same person, cosine 0.99) loses the
    # penalty too; here not enough to fall below the target
    scores = replay_scores(AxisBackend(), samples, GALLERY, reranking=RerankConfig(anchor=False))
    near_duplicate = [g.path for g in GALLERY].index("p1_1.png")
    assert scores[0][0, near_duplicate] == pytest.approx(0.99)
    assert scores[1][0, near_duplicate] == pytest.approx(0.99 - RerankConfig().rejection_penalty)
    full = evaluate_dialogues(AxisBackend(), samples, GALLERY, None)
    assert [r["r1"] for r in full.rounds] == [0.0, 0.0]


def test_judgements_follow_the_session_rules():
    from minterpr.evaluation.static import round_judgements

    position = {"p1_0.png": 2, "p2_0.png": 4}.get
    turns = [DescriptionTurn("person 1"), QATurn("which?", "number 1"), ReferenceTurn("p1_0.png", "No. A hat.")]
    assert round_judgements(turns, position) == [{}, {}, {2: False}]
    assert round_judgements(turns[:2] + [ReferenceTurn("p1_0.png", "Yes, that's her.")], position)[-1] == {2: True}
    assert round_judgements(turns[:2] + [ReferenceTurn("p1_0.png", "Maybe, I can't tell.")], position)[-1] == {2: None}
    assert round_judgements(turns[:2] + [ReferenceTurn("elsewhere.png", "No.")], position)[-1] == {}
    changed = round_judgements(
        turns + [ReferenceTurn("p2_0.png", "No."), ReferenceTurn("p1_0.png", "Yes, her.")], position
    )
    assert list(changed[-1].items()) == [(4, False), (2, True)]  # the latest verdict, moved last
