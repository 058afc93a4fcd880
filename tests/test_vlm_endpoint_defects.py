"""Issue 40: the VLM plug-in against an endpoint of our own (a scripted server): reworded questions,
model text shown raw, the key variable, a slow endpoint, undo, caption budgets, Retry-After, strict
schemas. Each test failed before its fix."""

import json

import pytest

from minterpr.language.dialogue_acts import question_slot
from minterpr.language.ontology import ONTOLOGY
from minterpr.vlm.assist import VLMAssistant
from minterpr.vlm.config import VLMConfig
from minterpr.vlm.testing import ScriptedServer, reply

PRONOUNS = (
    {"pronoun": "she", "possessive": "her", "object": "her"},
    {"pronoun": "he", "possessive": "his", "object": "him"},
)


def _phrased(server, slot, template):
    vlm = VLMAssistant(VLMConfig(server.url, "m", uses=("asking",)))
    vlm.begin_turn()
    text = vlm.phrase(slot, {}, "TEMPLATE", accept=lambda q: question_slot(q) == slot)
    return text, vlm.turn_usage()["discarded"]


def test_every_templates_own_wording_reworded_by_the_model_is_kept():
    """The check discarded ~45 % of correct questions: "hat" inside "what", offered alternatives ("a man
    or a woman"), the slot's own noun ("What kind of shoes")."""
    cases = [
        (slot.name, template.format(**p)) for slot in ONTOLOGY.slots for template in slot.questions for p in PRONOUNS
    ]
    cases += [("hair_length", "And what about the length of her hair?"), ("gender", "Man or woman, would you say?")]
    with ScriptedServer([lambda body: reply(json.dumps({"question": _asked[0]}))], repeat=True) as server:
        discarded = []
        for slot, question in cases:
            _asked[:] = [question]
            text, count = _phrased(server, slot, question)
            if text != question:
                discarded.append((slot, question))
            assert count == (text != question)
    assert discarded == []


_asked = [""]


@pytest.mark.parametrize(
    "slot, question",
    [
        ("upper_colour", "Was her top red?"),  # suggests an answer
        ("headwear", "What was that, then?"),  # "hat" inside "that"
        ("footwear_type", "Was she in boots?"),
    ],
)
def test_leading_or_off_slot_questions_are_discarded_and_counted(slot, question):
    with ScriptedServer([reply(json.dumps({"question": question}))]) as server:
        assert _phrased(server, slot, question) == ("TEMPLATE", 1)


HOSTILE = "\x1b[2J\x1b[H\x1b]0;SESSION EXPIRED\x07What colour was \u202eher top\u202c?\x9b31m\r\n"


def test_model_text_loses_escape_codes_and_bidi_overrides_before_it_is_shown():
    with ScriptedServer([reply(json.dumps({"question": HOSTILE}))]) as server:
        text, discarded = _phrased(server, "upper_colour", "What colour was her top?")
    assert text == "What colour was her top ?" and discarded == 0
    assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 or 0x202A <= ord(c) <= 0x202E for c in text)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """A dataset of 6 labelled crops (simulate's --data)."""
    import random

    from PIL import Image

    from support.helpers import random_attributes
    from minterpr.data.build import mark_dataset
    from minterpr.data.formats.gallery import write_gallery
    from minterpr.types import GalleryImage

    root = tmp_path_factory.mktemp("i40_toy")
    rng, gallery = random.Random(3), []
    for pid in range(6):
        path = f"p{pid}.png"
        Image.new("RGB", (8, 16), (pid * 30, 40, 80)).save(root / path)
        gallery.append(GalleryImage(path, f"toy:{pid}", attributes=random_attributes(rng, unknown_rate=0.0)))
    write_gallery(gallery, root / "gallery_test.jsonl")
    mark_dataset(root)
    return root


def _simulate_args(root, server_url, *extra):
    return [
        "simulate",
        "--backend",
        "attribute",
        "--data",
        str(root),
        "--rounds",
        "1",
        "--limit",
        "2",
        "-q",
        "--vlm-url",
        server_url,
        "--vlm-model",
        "m",
        *extra,
    ]


def test_an_unset_key_variable_stops_the_command_at_start_naming_it(toy, capsys, monkeypatch):
    import io

    from minterpr.cli.main import main

    monkeypatch.delenv("I40_UNSET_KEY", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO("a man\n:quit\n"))
    assert (
        main(
            [
                "chat",
                "--backend",
                "attribute",
                "--images",
                str(toy),
                "--vlm-url",
                "http://127.0.0.1:9/v1",
                "--vlm-model",
                "m",
                "--vlm-key-env",
                "I40_UNSET_KEY",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "I40_UNSET_KEY is not set" in err[0]


def test_a_server_with_an_unset_key_variable_does_not_start(tmp_path, monkeypatch):
    from minterpr.errors import InputError
    from minterpr.serving.config import ServeSettings
    from minterpr.serving.service import build_services

    monkeypatch.delenv("I40_UNSET_KEY", raising=False)
    settings = ServeSettings(
        data_dir=tmp_path / "state", vlm=VLMConfig("http://127.0.0.1:9/v1", "m", key_env="I40_UNSET_KEY")
    )
    with pytest.raises(InputError, match="I40_UNSET_KEY is not set"):
        build_services(settings)
    assert not (tmp_path / "state").exists()  # nothing created


def test_a_key_variable_unset_after_the_start_makes_the_turn_fall_back():
    from minterpr.vlm.errors import VLMUnavailable

    with ScriptedServer([reply("{}")]) as server:
        vlm = VLMAssistant(VLMConfig(server.url, "m", key_env="I40_NEVER_SET_KEY", uses=("asking",)))
        vlm.begin_turn()
        assert vlm.phrase("gender", {}, "TEMPLATE") == "TEMPLATE"
    assert server.requests == [] and vlm.client.calls[-1].outcome == VLMUnavailable.__name__


@pytest.mark.parametrize("value", ["sk-proj-Abc123xyz", "Bearer abc", "abc def", "1KEY", "x" * 200])
def test_a_key_given_instead_of_a_variable_name_is_refused_without_echoing_it(toy, value, capsys):
    from minterpr.cli.main import main
    from minterpr.errors import InputError

    with pytest.raises(InputError) as caught:
        VLMConfig("http://127.0.0.1:9/v1", "m", key_env=value)
    assert value not in str(caught.value) and "NAME of an environment variable" in str(caught.value)
    assert main(_simulate_args(toy, "http://127.0.0.1:9/v1", "--vlm-key-env", value)) == 2
    out = capsys.readouterr()
    assert value not in out.err + out.out


def test_serve_gallery_without_a_run_resolves_the_shipped_model_wherever_it_starts(tmp_path, monkeypatch):
    from minterpr.cli.commands.serve import gallery_specs
    from minterpr.models.zoo import shipped_model_dir

    monkeypatch.chdir(tmp_path)  # no "shipped" folder here
    [(name, store, run)] = gallery_specs([["lobby", "galleries/lobby"]])
    assert run == str(shipped_model_dir()) and (shipped_model_dir() / "config.json").is_file()
    assert gallery_specs([["hall", "g", "shipped:peta-pa100k-lite2"]])[0][2] == run


def test_undoing_the_only_turn_reports_no_model_call_of_the_undone_turn():
    from minterpr.interaction.attribute_backend import AttributeBackend
    from minterpr.interaction.session import Session
    from minterpr.types import GalleryImage

    images = [GalleryImage(f"{i}.jpg", f"p:{i}", attributes={"gender": (g,)}) for i, g in enumerate(["male", "female"])]
    backend = AttributeBackend()
    with ScriptedServer([reply(json.dumps({"question": "What colour was her top?"}))], repeat=True) as server:
        vlm = VLMAssistant(VLMConfig(server.url, "m", uses=("asking",)))
        session = Session(backend, backend.index_images(images), schedule="questions", vlm=vlm)
        session.describe("a woman")
        assert len(vlm.turn_usage()["records"]) == 1
        session.undo()
        assert vlm.turn_usage()["records"] == []  # the service audits these: the call was audited with its turn


def test_a_slow_endpoint_is_said_and_skipped_for_some_turns_while_it_keeps_failing():
    from minterpr.vlm.testing import status

    with ScriptedServer(
        [reply(json.dumps({"question": "What colour was her top?"}), delay_s=2.0)], repeat=True
    ) as server:
        vlm = VLMAssistant(
            VLMConfig(server.url, "m", uses=("asking",), turn_deadline_s=0.2, timeout_s=0.2, skip_turns=2)
        )
        notices, asked = [], []
        for _ in range(5):
            vlm.begin_turn()
            vlm.phrase("upper_colour", {}, "TEMPLATE")
            notices.append(vlm.notice)
            asked.append(len(server.requests))
    assert "did not answer in time" in notices[0] and "for the next 2 turns" in notices[0]
    assert asked == [1, 1, 1, 2, 2]  # turns 2 and 3 skipped, turn 4 tries again (and fails: 2 more skipped)
    assert all("searching without it" in n for n in notices)
    with ScriptedServer([status(500), reply(json.dumps({"question": "What colour was her top?"}))]) as server:
        vlm = VLMAssistant(VLMConfig(server.url, "m", uses=("asking",), max_retries=0, skip_turns=1))
        vlm.begin_turn()
        assert vlm.phrase("upper_colour", {}, "T") == "T" and "failed" in vlm.notice
        vlm.begin_turn()
        assert vlm.phrase("upper_colour", {}, "T") == "T" and vlm.turn_usage()["skipped"] == 1
        vlm.begin_turn()
        assert vlm.phrase("upper_colour", {}, "T") == "What colour was her top?" and vlm.notice == ""


def test_chat_says_when_the_model_failed(toy, capsys, monkeypatch):
    import io

    from minterpr.cli.main import main
    from minterpr.vlm.testing import status

    monkeypatch.setattr("sys.stdin", io.StringIO("hmm, someone in the drizzle\n:quit\n"))
    with ScriptedServer([status(500)], repeat=True) as server:
        assert (
            main(
                [
                    "chat",
                    "--backend",
                    "attribute",
                    "--images",
                    str(toy),
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
            == 0
        )
    out = capsys.readouterr().out
    assert f"note: the model at {server.url} " in out and "searching without it" in out


def test_vlm_caption_budgets_are_the_flags_and_it_gives_up_on_a_dead_endpoint(toy, tmp_path, capsys, monkeypatch):
    from minterpr.cli.main import main
    from minterpr.vlm import caption
    from minterpr.vlm.testing import status

    gallery = str(toy / "gallery_test.jsonl")
    seen = {}
    real = caption.caption_gallery

    def spy(images, root, client, out, **options):
        seen.update(config=client.config, **options)
        return real(images, root, client, out, **options)

    monkeypatch.setattr(caption, "caption_gallery", spy)
    with ScriptedServer([status(500)], repeat=True) as server:
        code = main(
            [
                "vlm",
                "caption",
                "--gallery",
                gallery,
                "--out",
                str(tmp_path / "c.jsonl"),
                "--vlm-url",
                server.url,
                "--vlm-model",
                "m",
                "--vlm-max-calls",
                "1000000",
                "--give-up-after",
                "2",
                "--vlm-deadline",
                "0.5",
            ]
        )
    out = capsys.readouterr().out
    assert code == 0 and "stopped: the endpoint gave no usable answer for 2 crops in a row" in out
    assert len(server.requests) <= 2 * 3  # two crops, three tries each at most: then it gave up
    # the run's budgets are its flags': no token budget stops it part-way (666 of 886 demo crops before)
    assert seen["config"].max_calls == 1_000_000 and seen["config"].max_total_tokens >= 10**12
    with ScriptedServer([status(500)], repeat=True) as server:
        main(
            [
                "vlm",
                "caption",
                "--gallery",
                gallery,
                "--out",
                str(tmp_path / "d.jsonl"),
                "--vlm-url",
                server.url,
                "--vlm-model",
                "m",
                "--vlm-deadline",
                "0.5",
            ]
        )
    assert seen["give_up_after"] == 5  # by default as the service's captioning job


def test_crops_with_nothing_seen_are_not_counted_as_captioned(toy, tmp_path, capsys):
    from minterpr.cli.main import main
    from minterpr.vlm.testing import valid_answer

    with ScriptedServer([valid_answer], repeat=True) as server:  # answers, sees nothing
        assert (
            main(
                [
                    "vlm",
                    "caption",
                    "--gallery",
                    str(toy / "gallery_test.jsonl"),
                    "--out",
                    str(tmp_path / "c.jsonl"),
                    "--vlm-url",
                    server.url,
                    "--vlm-model",
                    "m",
                    "--json",
                    str(tmp_path / "r.json"),
                ]
            )
            == 0
        )
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["captioned"], report["nothing_seen"]) == (0, 6)
    assert "captioned 0 crops (0 already done, 6 with nothing seen" in capsys.readouterr().out


def test_retry_after_is_honoured_and_retries_are_audited():
    from minterpr.serving.caption_jobs import AUDITED
    from minterpr.serving.search_turns import _VLM_AUDIT
    from minterpr.vlm.client import VLMClient
    from minterpr.vlm.errors import VLMUnavailable
    from minterpr.vlm.testing import status

    waits = []
    with ScriptedServer([status(429, retry_after="0.7"), reply('{"question": "What colour?"}')]) as server:
        client = VLMClient(VLMConfig(server.url, "m", backoff_s=0.01), sleep=waits.append)
        assert client.ask("asking", "x", schema={"type": "object"}) == {"question": "What colour?"}
    assert waits == [0.7] and client.calls[-1].attempts == 2
    with ScriptedServer([status(503, retry_after="30"), reply("{}")]) as server:  # past the 10 s deadline
        client = VLMClient(VLMConfig(server.url, "m"), sleep=waits.append)
        with pytest.raises(VLMUnavailable, match="asks to retry in 30 s"):
            client.ask("asking", "x")
    assert len(server.requests) == 1 and waits == [0.7]
    assert "attempts" in _VLM_AUDIT and "attempts" in AUDITED  # each call's tries, in the audit log


def test_the_simulators_bare_verdicts_are_not_sent_to_the_model():
    from minterpr.interaction.attribute_backend import AttributeBackend
    from minterpr.interaction.session import Session
    from minterpr.types import GalleryImage

    images = [GalleryImage(f"{i}.jpg", f"p:{i}", attributes={"gender": (g,)}) for i, g in enumerate(["male", "female"])]
    backend = AttributeBackend()
    with ScriptedServer([reply('{"facts": []}')], repeat=True) as server:
        session = Session(
            backend, backend.index_images(images), vlm=VLMAssistant(VLMConfig(server.url, "m", uses=("reading",)))
        )
        session.describe("a woman")
        for text in ("Not this one.", "No, that's not her.", "Maybe."):
            session.feedback(0, text)
        assert server.requests == []
        session.feedback(0, "hmm, a brolly in the drizzle")  # words to read: asked
        assert len(server.requests) == 1


def test_every_schema_sent_is_in_the_strict_subset_and_strict_is_set():
    from minterpr.vlm.client import VLMClient
    from minterpr.vlm.schema import (
        answers_schema,
        facts_schema,
        question_schema,
        scores_schema,
        strict_form,
        strict_problems,
    )

    schemas = [
        facts_schema(),
        facts_schema(("gender", "carried")),
        answers_schema(list(ONTOLOGY.slot_names)),
        answers_schema(["gender"]),
        question_schema(),
        scores_schema(5),
    ]
    assert any(strict_problems(schema) for schema in schemas)  # the full schemas are not (their limits)
    for schema in schemas:
        assert strict_problems(strict_form(schema)) == []
    with ScriptedServer([reply('{"question": "What colour?"}')] * 2) as server:
        client = VLMClient(VLMConfig(server.url, "m"))
        client.ask("asking", "x", schema=question_schema())
        sent = server.requests[0]["body"]["response_format"]["json_schema"]
        assert sent["strict"] is True and strict_problems(sent["schema"]) == []
        client = VLMClient(VLMConfig(server.url, "m", strict=False))
        client.ask("asking", "y", schema=question_schema())
        assert "strict" not in server.requests[1]["body"]["response_format"]["json_schema"]


def test_a_server_refusing_strict_mode_is_asked_again_with_the_schema_but_without_it():
    from minterpr.vlm.client import VLMClient
    from minterpr.vlm.schema import question_schema
    from minterpr.vlm.testing import status

    def strict_refused(body):
        return status(400) if body["response_format"]["json_schema"].get("strict") else reply('{"question": "Hair?"}')

    with ScriptedServer([strict_refused], repeat=True) as server:
        client = VLMClient(VLMConfig(server.url, "m"))
        assert client.ask("asking", "x", schema=question_schema()) == {"question": "Hair?"}
        client.ask("asking", "z", schema=question_schema())
    kinds = [r["body"]["response_format"]["json_schema"].get("strict") for r in server.requests]
    assert kinds == [True, None, None]  # remembered: the next call is sent without it, the schema still sent


def test_a_withdrawn_anchor_reading_keeps_its_image_in_the_event():
    """The user's own "red top" and the model's reading of the anchor's red top are different facts: the
    withdrawal of one names the image, so a rebuilt session drops that one and not the other."""
    from minterpr.interaction.history import ModelFact
    from minterpr.language.phrasing import Fact
    from minterpr.serving.events import Event, recorded_fact, withdraw_payload, withdrawn

    own = ModelFact("upper_colour", ("red",), use="anchor", image="")
    seen = ModelFact("upper_colour", ("red",), use="anchor", image="cam1/0004.jpg")
    said = (Fact("upper_colour", ("red",)), own, seen)
    payload = json.loads(json.dumps(withdraw_payload(0, seen)))
    assert payload["fact"][-1] == "cam1/0004.jpg"
    turn, fact = withdrawn(Event(1, "withdraw", payload), 1)
    assert recorded_fact(said, fact) == seen != own and recorded_fact(said, fact).image == seen.image
