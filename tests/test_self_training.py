"""Mean-teacher self-training on unlabelled crops: `minterpr adapt --method self-train` (issue 37 item 2)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import minterpr.training.self_training as self_training
from minterpr.cli.main import main
from minterpr.errors import RunError
from minterpr.models import create_model
from minterpr.training.self_training import SelfTrainer, SelfTrainingConfig

SIDE = ("image_encoder.", "image_head.")


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    model = create_model("tiny")
    with torch.no_grad():  # a model that is sure of some answers (a random head is sure of none)
        model.image_head.attributes.label_bias.copy_(torch.randn_like(model.image_head.attributes.label_bias) * 3)
    return model


def _pixels(model, n=10) -> torch.Tensor:
    return torch.randint(
        0, 256, (n, 3, *model.config.image_size), dtype=torch.uint8, generator=torch.Generator().manual_seed(3)
    )


def _trainer(out: Path, **overrides) -> SelfTrainer:
    model = _model()
    cfg = SelfTrainingConfig(
        **{"epochs": 2, "batch_size": 4, "warmup_steps": 1, "checkpoint_every_steps": 1, "lr": 1e-2, **overrides}
    )
    pixels = _pixels(model)
    return SelfTrainer(
        model, cfg, out, pixels=pixels, paths=[f"c{i}.png" for i in range(len(pixels))], log=lambda _: None
    )


def _side(model) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items() if k.startswith(SIDE)}


def test_self_training_moves_the_image_side_toward_the_teachers_answers(tmp_path):
    trainer = _trainer(tmp_path / "st")
    before = _side(trainer.model)
    record = trainer.run()
    after = _side(trainer.model)
    assert [h["epoch"] for h in record["history"]] == [1, 2]
    assert all(0 < h["confident_share"] <= 1 for h in record["history"])
    assert any(not torch.equal(before[k], after[k]) for k in before if k.startswith("image_head."))
    assert all(torch.equal(before[k], after[k]) for k in before if k.startswith("image_encoder.stages.0."))  # frozen
    # a rerun reuses the result; other settings are refused
    again = _trainer(tmp_path / "st")
    again.run()
    assert all(torch.equal(after[k], v) for k, v in _side(again.model).items())
    with pytest.raises(RunError, match="other settings"):
        _trainer(tmp_path / "st", confidence=0.7).run()


def test_a_killed_self_training_resumes_to_the_same_weights(tmp_path, monkeypatch):
    reference = _trainer(tmp_path / "ref")
    reference.run()
    calls = {"n": 0}
    real = self_training.augment_batch

    def dying(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 7:  # the weak view of the 4th step: after three checkpoints
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(self_training, "augment_batch", dying)
    with pytest.raises(KeyboardInterrupt):
        _trainer(tmp_path / "killed").run()
    monkeypatch.setattr(self_training, "augment_batch", real)
    assert (tmp_path / "killed" / "last.pt").is_file() and not (tmp_path / "killed" / "self_trained.pt").exists()
    resumed = _trainer(tmp_path / "killed")
    resumed.run()
    for key, value in _side(reference.model).items():
        assert torch.allclose(value.float(), resumed.model.state_dict()[key].float(), atol=1e-6), key


def test_teacher_targets_are_soft_or_one_hot_on_confident_answers_only():
    from minterpr.language.ontology import ONTOLOGY

    probs = torch.full((2, len(ONTOLOGY.flat_labels())), 0.5)
    gender = ONTOLOGY.slot_columns()["gender"]
    probs[0, gender] = torch.tensor([0.85, 0.15])
    soft, mask = self_training.teacher_targets(probs, 0.8, soft=True)
    hard, same = self_training.teacher_targets(probs, 0.8, soft=False)
    assert torch.equal(mask, same) and int(mask.sum()) == 2 and not mask[1].any()
    assert soft[0, gender].tolist() == pytest.approx([0.85, 0.15]) and hard[0, gender].tolist() == [1.0, 0.0]


def _crops(folder: Path, n: int = 6) -> Path:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (48, 24, 3), dtype=np.uint8)).save(folder / f"crop{i}.png")
    return folder


def test_adapt_self_train_reads_crops_or_a_gallery_store_and_records_the_adaptation(tmp_path, capsys):
    from minterpr.index.gallery_index import GalleryIndex
    from minterpr.index.store.gallery_store import save_gallery
    from minterpr.models.io import save_model
    from minterpr.runtime.run import load_run
    from minterpr.types import GalleryImage

    model = _model()
    save_model(model, tmp_path / "base.pt")
    crops = _crops(tmp_path / "crops")
    out = tmp_path / "adapted"
    capsys.readouterr()
    assert (
        main(
            [
                "adapt",
                "--run",
                str(tmp_path / "base.pt"),
                "--images",
                str(crops),
                "--out",
                str(out),
                "--method",
                "self-train",
                "--epochs",
                "1",
                "--quiet",
                "--json",
                "-",
            ]
        )
        == 0
    )
    record = json.loads(capsys.readouterr().out)
    assert record["method"] == "self-train" and record["crops"] == 6 and record["confidence"] == 0.8
    assert record["self_training"]["history"][0]["epoch"] == 1
    adapted = load_run(out)
    assert adapted.extras.other["adaptation"]["self_training"] == record["self_training"]
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, adapted.model.state_dict()[k])]
    assert changed and all(k.startswith(SIDE) for k in changed)
    # a user's gallery store: its images, wherever its root puts them (one missing: left out)
    images = [GalleryImage(path=f"crop{i}.png", person_id=f"p{i}") for i in range(6)]
    images.append(GalleryImage(path="gone.png", person_id="p9"))
    embeddings = np.eye(7, 8, dtype=np.float32)
    save_gallery(GalleryIndex(images, embeddings, root=str(crops)), tmp_path / "store", model_fingerprint=None)
    assert (
        main(
            [
                "adapt",
                "--run",
                str(tmp_path / "base.pt"),
                "--images",
                str(tmp_path / "store"),
                "--out",
                str(tmp_path / "from_store"),
                "--method",
                "self-train",
                "--epochs",
                "1",
                "--quiet",
                "--json",
                "-",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["crops"] == 6
    assert (
        main(
            [
                "adapt",
                "--run",
                str(tmp_path / "base.pt"),
                "--images",
                str(crops),
                "--out",
                str(tmp_path / "bad"),
                "--method",
                "self-train",
                "--confidence",
                "0.4",
            ]
        )
        == 2
    )
    assert "confidence" in capsys.readouterr().err
