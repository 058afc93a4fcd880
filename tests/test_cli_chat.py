"""``minterpr chat`` and ``minterpr simulate`` driven with the attribute backend."""
from __future__ import annotations

import io
import json

import pytest

from minterpr.cli.chat import ChatLoop
from minterpr.cli.main import main
from minterpr.data.formats.gallery import write_gallery
from minterpr.evaluation.report import EvaluationReport
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.interaction.session import Session


@pytest.fixture(scope="module")
def dataset(attribute_gallery, tmp_path_factory):
    root = tmp_path_factory.mktemp("chat_data")
    write_gallery(attribute_gallery[:150], root / "gallery_test.jsonl")
    return root


def _chat(gallery, script, **session_options):
    backend = AttributeBackend()
    session = Session(backend, backend.index_images(gallery), **session_options)
    out = io.StringIO()
    code = ChatLoop(session, out, top=3).run(io.StringIO(script))
    return code, out.getvalue(), session


def test_chat_loop_describe_answer_feedback_undo(attribute_gallery):
    gallery = attribute_gallery[:150]
    script = "\n".join([
        "a woman in a red top",
        "Jeans.",  # answers the system's question
        ":feedback 1 not her, no backpack",
        ":explain 2",
        ":feedback 99999 nope",
        ":dance",
        ":undo",
        ":quit",
        "this line is never read",
    ]) + "\n"
    code, text, session = _chat(gallery, script, schedule="questions", question_policy="fixed")
    assert code == 0 and text.rstrip().endswith("bye")
    assert "  1. " in text and "score" in text and "matches: gender: female" in text
    assert text.index("  1. ") < text.index("system: ")  # results come before the question
    assert text.count("system: ") >= 3
    assert "error: rank 99999 out of range" in text and "error: unknown command :dance" in text
    # after :undo the feedback turn is gone; the answer stayed and was read with its question's slot
    assert len(session.history) == 2 and session.judgements == {}
    assert session.history[1].turn.answer == "Jeans."
    assert any(f.slot == "lower_type" and f.values == ("jeans",) for f in session.facts)


def test_chat_yes_marks_the_person_found(attribute_gallery):
    gallery = attribute_gallery[:150]
    code, text, session = _chat(gallery, "a man with a backpack\n:no 1 he had a hat\n:yes 2\n")
    assert session.judgements and list(session.judgements.values()) == [False, True]
    confirmed = next(i for i, ok in session.judgements.items() if ok)
    assert session.step.ranking[0] == confirmed and session.action is None
    assert "system: found." in text and "bye" in text  # EOF ends the chat


def test_chat_references_are_addressed_as_rk(attribute_gallery):
    gallery = attribute_gallery[:150]
    code, text, session = _chat(gallery, "a woman\n:yes r2\n", schedule="references")
    assert "r1 " in text and "r2 " in text
    backend = AttributeBackend()
    shown = Session(backend, backend.index_images(gallery), schedule="references").describe("a woman").action.indices
    assert session.judgements == {shown[1]: True}  # r2 = the second image the system showed


def test_chat_command_end_to_end(dataset, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("a man in a black jacket\n:yes 1\n:quit\n"))
    assert main(["chat", "--backend", "attribute", "--images", str(dataset), "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "  1. " in out and "system: found." in out


def test_chat_without_pipeline_or_directory_is_a_clear_error(dataset, tmp_path, capsys):
    assert main(["chat", "--backend", "attribute", "--images", str(tmp_path / "nope")]) == 2
    assert "image directory not found" in capsys.readouterr().err
    assert main(["chat", "--run", str(tmp_path / "no_run"), "--images", str(dataset)]) == 2
    err = capsys.readouterr().err
    assert "pipeline" in err or "run directory not found" in err


def test_simulate_command_writes_report_and_plot(dataset, tmp_path, capsys):
    out_json, out_png = tmp_path / "r.json", tmp_path / "r.png"
    code = main(["simulate", "--backend", "attribute", "--attribute-noise", "1.0", "--data", str(dataset),
                 "--rounds", "2", "--limit", "15", "--questions", "fixed", "--references", "top1",
                 "--simulator", "oracle", "--wrong-answer-rate", "0.1", "--json", str(out_json), "--plot", str(out_png)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "R@1" in printed and "BRI" in printed and "protocol.simulator" in printed
    report = EvaluationReport.load(out_json)
    assert len(report.rounds) == 3 and report.protocol["num_targets"] == 15
    assert report.protocol["simulator"]["wrong_answer_rate"] == 0.1 and report.protocol["split"] == "test"
    assert out_png.read_bytes()[:4] == b"\x89PNG"


def test_simulate_compare(dataset, tmp_path, capsys):
    out_json, out_png = tmp_path / "c.json", tmp_path / "c.png"
    code = main(["simulate", "--backend", "attribute", "--data", str(dataset), "--rounds", "1", "--limit", "8",
                 "--compare", "--json", str(out_json), "--plot", str(out_png), "--attribute-weight", "0.3"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "questions: info_gain" in printed and "references: top1" in printed
    data = json.loads(out_json.read_text())
    assert len(data["settings"]) >= 5
    assert all(EvaluationReport.from_dict(r).protocol["num_targets"] == 8 for r in data["settings"].values())
    noisy = data["settings"]["both: alternate, noisy oracle"]["protocol"]["simulator"]
    assert noisy["dont_know_rate"] == 0.2 and noisy["wrong_answer_rate"] == 0.1
    assert data["settings"]["questions: random"]["protocol"]["simulator"]["wrong_answer_rate"] == 0.0
    switches = {name: data["settings"][name]["protocol"]["reranking"]
                for name in ("auto, no attribute evidence", "auto, no rejection", "auto, no anchor")}
    assert [(s["attributes"], s["rejection"], s["anchor"]) for s in switches.values()] == \
        [(False, True, True), (True, False, True), (True, True, False)]
    assert {s["attribute_weight"] for s in switches.values()} == {0.3}  # the shared config, one term switched
    assert data["settings"]["auto: info_gain + diverse"]["protocol"]["reranking"]["attribute_weight"] == 0.3
    assert out_png.read_bytes()[:4] == b"\x89PNG"


def test_simulate_rejects_a_negative_attribute_weight(dataset, capsys):
    assert main(["simulate", "--backend", "attribute", "--data", str(dataset), "--attribute-weight", "-1"]) == 2
    assert "--attribute-weight must be >= 0" in capsys.readouterr().err


def test_simulate_missing_gallery(tmp_path, capsys):
    assert main(["simulate", "--backend", "attribute", "--data", str(tmp_path)]) == 2
    assert "gallery manifest not found" in capsys.readouterr().err
