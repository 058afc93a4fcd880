"""Issue 40 through the commands: a key variable unset or a key given in its place stops ``chat``,
``simulate`` and ``serve`` at start, ``chat`` says when the model failed, ``vlm caption``'s budgets are
its flags and it gives up on a dead endpoint. Each test failed before its fix. (The plug-in's own
defects are in ``test_vlm_endpoint_defects.py``.)"""

import json

import pytest

from minterpr.vlm.config import VLMConfig
from minterpr.vlm.testing import ScriptedServer


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
