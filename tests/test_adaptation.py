"""Adapting a trained run to a new site's unlabelled crops: `minterpr adapt`, BatchNorm statistics, pseudo-labels."""

from __future__ import annotations

import json

import torch

from minterpr.cli.main import main
from minterpr.language.ontology import ONTOLOGY
from minterpr.runtime.run import load_run
from minterpr.training.adaptation import pseudo_labels

from support.tuning import tiny_data  # noqa: F401  (a fixture)


def test_pseudo_labels_keep_only_confident_answers():
    labels = ONTOLOGY.flat_labels()
    probs = torch.full((2, len(labels)), 0.5).numpy()
    columns = ONTOLOGY.slot_columns()
    probs[0, columns["gender"]] = [0.97, 0.03]
    probs[1, columns["gender"]] = [0.6, 0.4]  # unsure: masked
    colours = columns["upper_colour"]
    probs[0, colours] = 0.02  # sure of every "no" ...
    probs[0, colours[0]] = 0.95  # ... and of one colour
    targets, mask = pseudo_labels(probs, confidence=0.9)
    assert targets[0, columns["gender"]].tolist() == [1.0, 0.0] and mask[0, columns["gender"]].all()
    assert not mask[1].any()  # nothing sure about the second crop
    assert targets[0, colours].sum() == 1 and mask[0, colours].all()


def test_adapt_fine_tunes_on_unlabelled_crops_and_keeps_the_run_usable(tiny_data, tmp_path, capsys):
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--config",
                "tiny",
                "--data",
                str(tiny_data),
                "--out",
                str(run),
                "--set",
                "progress=false",
                "--set",
                "stages.0.epochs=1",
                "--set",
                "stages.1.epochs=1",
                "--set",
                "stages.2.epochs=0",
            ]
        )
        == 0
    )
    crops = tiny_data / "images"
    out = tmp_path / "adapted"
    capsys.readouterr()
    code = main(
        [
            "adapt",
            "--run",
            str(run),
            "--images",
            str(crops),
            "--out",
            str(out),
            "--confidence",
            "0.6",
            "--method",
            "bn+pseudo",
            "--epochs",
            "1",
            "--quiet",
            "--json",
            "-",
        ]
    )
    assert code == 0
    record = json.loads(capsys.readouterr().out)
    assert (
        record["pseudo_labels"]["images"] > 0
        and 0 < record["pseudo_labels"]["kept"] <= record["pseudo_labels"]["images"]
    )
    adapted, base = load_run(out), load_run(run)
    assert adapted.extras.other["adaptation"]["confidence"] == 0.6
    assert adapted.extras.rerank_config() == base.extras.rerank_config()
    changed = [k for k, v in base.model.state_dict().items() if not torch.equal(v, adapted.model.state_dict()[k])]
    assert changed and all(k.startswith(("image_encoder.", "image_head.")) for k in changed)
    assert main(["adapt", "--run", str(run), "--images", str(crops), "--out", str(out)]) == 2  # model.pt exists
    assert "already holds" in capsys.readouterr().err
    assert main(["adapt", "--run", str(run), "--images", str(tmp_path / "none"), "--out", str(tmp_path / "o")]) == 2
    assert (
        main(
            [
                "adapt",
                "--run",
                str(run),
                "--images",
                str(crops),
                "--out",
                str(tmp_path / "o"),
                "--method",
                "pseudo",
                "--confidence",
                "1.5",
            ]
        )
        == 2
    )


def test_list_crops_follows_linked_folders(tmp_path):
    from minterpr.training.adaptation import list_crops

    (tmp_path / "site" / "cam1").mkdir(parents=True)
    (tmp_path / "site" / "cam1" / "a.JPG").write_bytes(b"x")
    (tmp_path / "site" / "notes.txt").write_text("no")
    (tmp_path / "crops").mkdir()
    (tmp_path / "crops" / "linked").symlink_to(tmp_path / "site", target_is_directory=True)
    assert list_crops(tmp_path / "crops") == ["linked/cam1/a.JPG"]


def test_adapt_batch_norm_sets_the_exact_statistics_of_the_crops():
    from minterpr.models import create_model
    from minterpr.training.adaptation import adapt_batch_norm
    from minterpr.training.labelled_images import normalise

    model = create_model("tiny")
    crops = torch.randint(0, 256, (10, 3, *model.config.image_size), dtype=torch.uint8)
    first = next(m for m in model.image_encoder.modules() if isinstance(m, torch.nn.BatchNorm2d))
    seen = []
    hook = first.register_forward_pre_hook(lambda module, inputs: seen.append(inputs[0].detach().clone()))
    layers = adapt_batch_norm(model, crops, batch_size=3)  # batches of 3, 3, 3, 1: order and size must not matter
    hook.remove()
    assert layers >= 1 and not model.training and first.momentum == 0.1
    inputs = torch.cat(seen).transpose(0, 1).flatten(1)  # (C, N·H·W): the plain reference
    torch.testing.assert_close(first.running_mean, inputs.mean(dim=1), rtol=1e-4, atol=1e-5)
    # each batch's unbiased variance, averaged by batch: what cumulative BatchNorm keeps (batches of 3 dominate)
    assert torch.all(first.running_var > 0)
    again = create_model("tiny")
    again.load_state_dict(model.state_dict())
    adapt_batch_norm(again, crops, batch_size=3)
    torch.testing.assert_close(again.image_encoder.state_dict(), model.image_encoder.state_dict())  # deterministic
    with torch.no_grad():  # a model whose statistics were adapted gives other outputs than the source model
        model.eval()
        fresh = create_model("tiny")
        fresh.load_state_dict({k: v for k, v in model.state_dict().items() if "running" not in k}, strict=False)
        fresh.eval()
        x = normalise(crops[:2], model)
        assert not torch.allclose(
            model.encode_images(x)["attribute_logits"], fresh.encode_images(x)["attribute_logits"]
        )


def test_adapt_bn_method_changes_only_batch_norm_statistics(tiny_data, tmp_path, capsys):
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--config",
                "tiny",
                "--data",
                str(tiny_data),
                "--out",
                str(run),
                "--set",
                "progress=false",
                "--set",
                "stages.0.epochs=1",
                "--set",
                "stages.1.epochs=0",
                "--set",
                "stages.2.epochs=0",
            ]
        )
        == 0
    )
    out = tmp_path / "adapted"
    capsys.readouterr()
    assert (
        main(
            [
                "adapt",
                "--run",
                str(run),
                "--images",
                str(tiny_data / "images"),
                "--out",
                str(out),
                "--quiet",
                "--json",
                "-",
            ]
        )
        == 0
    )  # bn is the default
    record = json.loads(capsys.readouterr().out)
    assert record["method"] == "bn" and record["batch_norm_layers"] > 0 and record["pseudo_labels"] is None
    adapted, base = load_run(out), load_run(run)
    changed = [k for k, v in base.model.state_dict().items() if not torch.equal(v, adapted.model.state_dict()[k])]
    assert changed and all(
        k.startswith("image_encoder.") and k.rsplit(".", 1)[1] in ("running_mean", "running_var", "num_batches_tracked")
        for k in changed
    )
