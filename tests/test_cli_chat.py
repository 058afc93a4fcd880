"""``minterpr chat`` and ``minterpr simulate`` driven with the attribute backend."""

from __future__ import annotations

import io
import json
import re

import pytest

from minterpr.cli.shared.chat_loop import ChatLoop
from minterpr.cli.main import main
from minterpr.data.build import mark_dataset
from minterpr.data.formats.gallery import write_gallery
from minterpr.evaluation.report import EvaluationReport
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.interaction.history import read_history
from minterpr.interaction.session import Session


@pytest.fixture(scope="module")
def dataset(attribute_gallery, tmp_path_factory):
    root = tmp_path_factory.mktemp("chat_data")
    write_gallery(attribute_gallery[:150], root / "gallery_test.jsonl")
    mark_dataset(root)  # simulate reads only finished (fingerprinted) datasets
    return root


def _chat(gallery, script, **session_options):
    backend = AttributeBackend()
    session = Session(backend, backend.index_images(gallery), **session_options)
    out = io.StringIO()
    code = ChatLoop(session, out, top=3).run(io.StringIO(script))
    return code, out.getvalue(), session


def test_chat_loop_describe_answer_feedback_undo(attribute_gallery):
    gallery = attribute_gallery[:150]
    script = (
        "\n".join(
            [
                "a woman in a red top",
                "Jeans.",  # answers the system's question
                ":feedback 1 not her, no backpack",
                ":explain 2",
                ":feedback 99999 nope",
                ":dance",
                ":undo",
                ":quit",
                "this line is never read",
            ]
        )
        + "\n"
    )
    code, text, session = _chat(gallery, script, schedule="questions", question_policy="fixed")
    assert code == 0 and text.rstrip().endswith("bye")
    assert "  1. " in text and "matches: gender: female" in text
    # each result: its camera when known and the bounded match probability (never a raw, negative score)
    first = next(line for line in text.splitlines() if line.startswith("  1. "))
    assert re.search(r"  match (\d+ %|< 1 %)  ", first) and "score" not in first, first
    assert text.index("  1. ") < text.index("system: ")  # results come before the question
    assert "understood: gender: female; top colour: red" in text  # what the description was read as
    assert text.index("understood: ") < text.index("  1. ")
    assert text.count("system: ") >= 3
    assert "error: rank 99999 out of range" in text and "error: unknown command :dance" in text
    # after :undo the feedback turn is gone; the answer stayed and was read with its question's slot
    assert len(session.history) == 2 and session.judgements == {}
    assert session.history[1].turn.answer == "Jeans."
    assert any(f.slot == "lower_type" and f.values == ("jeans",) for f in session.facts)


def test_one_unsaved_turn_is_singular(attribute_gallery):
    code, text, _ = _chat(attribute_gallery[:50], "a woman in a red top\n:quit\n")
    assert "(1 turn not saved:" in text, text


def test_chat_help_says_it_reads_standard_input_and_lists_the_commands(capsys):
    from minterpr.cli.main import main

    with pytest.raises(SystemExit):
        main(["chat", "--help"])
    out = capsys.readouterr().out
    assert "standard input" in out and ":feedback K TEXT" in out and ":quit" in out


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
    code = main(
        [
            "simulate",
            "--backend",
            "attribute",
            "--attribute-noise",
            "1.0",
            "--data",
            str(dataset),
            "--rounds",
            "2",
            "--limit",
            "15",
            "--questions",
            "fixed",
            "--references",
            "top1",
            "--simulator",
            "oracle",
            "--wrong-answer-rate",
            "0.1",
            "--json",
            str(out_json),
            "--plot",
            str(out_png),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "R@1" in printed and "BRI" in printed and "protocol.simulator" in printed
    report = EvaluationReport.load(out_json)
    assert len(report.rounds) == 3 and report.protocol["num_targets"] == 15
    assert report.protocol["simulator"]["wrong_answer_rate"] == 0.1 and report.protocol["split"] == "test"
    assert out_png.read_bytes()[:4] == b"\x89PNG"


def test_simulate_compare(dataset, tmp_path, capsys):
    out_json, out_png = tmp_path / "c.json", tmp_path / "c.png"
    code = main(
        [
            "simulate",
            "--backend",
            "attribute",
            "--data",
            str(dataset),
            "--rounds",
            "1",
            "--limit",
            "8",
            "--compare",
            "--json",
            str(out_json),
            "--plot",
            str(out_png),
            "--attribute-weight",
            "0.3",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "questions: info_gain" in printed and "references: top1" in printed
    data = json.loads(out_json.read_text())
    assert len(data["settings"]) >= 5
    assert all(EvaluationReport.from_dict(r).protocol["num_targets"] == 8 for r in data["settings"].values())
    noisy = data["settings"]["both: alternate, noisy oracle"]["protocol"]["simulator"]
    assert noisy["dont_know_rate"] == 0.2 and noisy["wrong_answer_rate"] == 0.1
    assert data["settings"]["questions: random"]["protocol"]["simulator"]["wrong_answer_rate"] == 0.0
    switches = {
        name: data["settings"][name]["protocol"]["reranking"]
        for name in ("auto, no attribute evidence", "auto, no rejection", "auto, no anchor")
    }
    assert [(s["attributes"], s["rejection"], s["anchor"]) for s in switches.values()] == [
        (False, True, True),
        (True, False, True),
        (True, True, False),
    ]
    assert {s["attribute_weight"] for s in switches.values()} == {0.3}  # the shared config, one term switched
    assert data["settings"]["auto: info_gain + diverse"]["protocol"]["reranking"]["attribute_weight"] == 0.3
    assert out_png.read_bytes()[:4] == b"\x89PNG"


def test_simulate_rejects_a_negative_attribute_weight(dataset, capsys):
    assert main(["simulate", "--backend", "attribute", "--data", str(dataset), "--attribute-weight", "-1"]) == 2
    assert "--attribute-weight must be >= 0" in capsys.readouterr().err


def test_simulate_missing_gallery(tmp_path, capsys):
    assert main(["simulate", "--backend", "attribute", "--data", str(tmp_path)]) == 2
    assert "gallery manifest not found" in capsys.readouterr().err


# ----- a chat never ends on an error, and never loses the conversation (issue 11) -----------------
def test_chat_reports_errors_and_goes_on(attribute_gallery, tmp_path):
    gallery = attribute_gallery[:150]
    script = (
        b"\n".join(
            [
                b"a woman in a red top",
                b":example",
                b":example missing.jpg",
                b"she wore \xff\xfe jeans",  # not UTF-8
                b":feedback 1",
                b":feedback x not her",
                b":save",
                b":explain 0",
                b"Jeans.",
            ]
        )
        + b"\n"
    )
    backend = AttributeBackend()
    session = Session(
        backend, backend.index_images(gallery, str(tmp_path)), schedule="questions", question_policy="fixed"
    )
    out = io.StringIO()
    assert ChatLoop(session, out, top=3).run(io.BytesIO(script)) == 0
    text = out.getvalue()
    assert "error: usage: :example PATH" in text
    assert "error: could not add" not in text and "error: image path 'missing.jpg': no such image file" in text
    assert "error: line 4 is not valid UTF-8 text; skipped" in text
    assert "error: :feedback needs a text" in text and "expected a result number K or a shown reference rK" in text
    assert "error: usage: :save FILE" in text and "error: rank 0 out of range" in text
    assert "Traceback" not in text and text.rstrip().endswith("bye")
    assert "(2 turns not saved: :save FILE or --transcript FILE keeps them)" in text
    assert [type(e.turn).__name__ for e in session.history] == ["DescriptionTurn", "QATurn"]


def test_plain_replies_to_shown_references(attribute_gallery):
    gallery = attribute_gallery[:150]
    # one image shown: "no ..." judges it, with its reasons as facts
    code, text, session = _chat(gallery, "a man\nnot him, he had a backpack\n", schedule="references", num_references=1)
    assert session.history[1].turn.feedback == "not him, he had a backpack"
    assert list(session.judgements.values()) == [False] and any(f.slot == "carried" for f in session.facts)
    # several shown: "no" rejects each (reasons once), "yes" asks which one, a remark is a description
    script = "a woman\nyes\nno, she had long hair\nshe wore a hat\n:undo\n:undo\n"
    code, text, session = _chat(gallery, script, schedule="references", num_references=3)
    assert "error: which of the 3 shown images? e.g. :yes r1" in text
    assert "(rejected r1..r3; :undo takes them all back)" in text
    assert "(a remark about the person" in text
    assert len(session.history) == 1 and session.judgements == {}  # two :undo took back the remark and the 3 rejections
    code, text, session = _chat(gallery, "a woman\nno, she had long hair\n", schedule="references", num_references=3)
    assert list(session.judgements.values()) == [False] * 3
    assert sum(f.slot == "hair_length" for f in session.facts) == 1


def test_transcript_keeps_the_conversation_and_continues_it(dataset, tmp_path, monkeypatch, capsys):
    transcript = tmp_path / "talk.json"
    args = ["chat", "--backend", "attribute", "--images", str(dataset), "--top", "2", "--transcript", str(transcript)]
    stdin = io.TextIOWrapper(io.BytesIO(b"a man in a black jacket\n\xc3(\n:example /no/such.jpg\n:no 1\n"))
    monkeypatch.setattr("sys.stdin", stdin)
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "error: line 2 is not valid UTF-8 text; skipped" in out and "no such image file" in out
    assert f"conversation saved to {transcript}" in out
    first = read_history(transcript)
    assert len(first) == 2
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"he had a backpack\n")))
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"continuing the conversation in {transcript} (2 turns)" in out
    assert read_history(transcript)[:2] == first and len(read_history(transcript)) == 3
    (tmp_path / "blocker").write_text("")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main([*args[:-1], str(tmp_path / "blocker" / "x.json")]) == 2
    assert "cannot save the conversation" in capsys.readouterr().err


def test_chat_reports_unreadable_images_in_one_line(dataset, monkeypatch, capsys):
    import minterpr.cli.commands.chat as chat

    def build_index(backend, images, root, *, complete, progress=True):
        assert complete is False  # chat keeps going without the unreadable images
        index = backend.index_images(images, root=root)
        index.skipped = (("cam1/broken.png", "not an image"), ("cam1/gone.png", "file not found"))
        return index

    monkeypatch.setattr(chat, "build_index", build_index)
    monkeypatch.setattr("sys.stdin", io.StringIO(":quit\n"))
    assert main(["chat", "--backend", "attribute", "--images", str(dataset)]) == 0
    out = capsys.readouterr().out
    assert "2 images could not be read and were left out, e.g. cam1/broken.png: not an image" in out


def test_a_stores_capture_times_are_shown_with_its_results(tmp_path_factory, one_torch_thread):
    from minterpr.cli.commands.chat import store_times
    from support.serving import shared_world

    _, store = shared_world(tmp_path_factory)
    times = store_times(store, 24)
    assert times is not None and len(times) == 24 and times[0].startswith("2026-03-02T08:00")
    assert store_times(store, 23) is None  # metadata that does not fit the index is not guessed at
