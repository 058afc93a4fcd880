"""Fine-tuning the image side on labelled pixels: augmentation, balanced loss, flip TTA, the loop."""

from __future__ import annotations

import json
import math

import pytest
import torch

import minterpr.training.image_tuning as image_tuning
from minterpr.models import create_model
from minterpr.models.losses import attribute_loss, positive_ratio
from minterpr.training.config import ConfigError, ImageTuningConfig, config_from_dict, load_config
from minterpr.training.image_augment import AugmentConfig, augment_batch
from minterpr.training.image_tuning import load_tuned
from minterpr.training.trainer import Trainer

from support.tuning import make_tuner as _tuner, tiny_data  # noqa: F401  (tiny_data is a fixture)

OFF = dict(flip=0.0, shift=0.0, scale_min=1.0, scale_max=1.0, blur=0.0, low_resolution=0.0, jpeg=0.0, erasing=0.0)


def _images(n=6, h=32, w=16, seed=0):
    return torch.randint(0, 256, (n, 3, h, w), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


def test_augmentation_is_seeded_and_keeps_shape():
    images = _images()
    a = augment_batch(images, AugmentConfig(), torch.Generator().manual_seed(1))
    b = augment_batch(images, AugmentConfig(), torch.Generator().manual_seed(1))
    c = augment_batch(images, AugmentConfig(), torch.Generator().manual_seed(2))
    assert a.shape == images.shape and a.dtype == torch.uint8
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_every_transform_off_is_the_identity_and_flip_alone_mirrors():
    images = _images()
    assert torch.equal(augment_batch(images, AugmentConfig(**OFF), torch.Generator().manual_seed(0)), images)
    flipped = augment_batch(images, AugmentConfig(**{**OFF, "flip": 1.0}), torch.Generator().manual_seed(0))
    assert torch.equal(flipped, images.flip(-1))


@pytest.mark.parametrize("transform", ["shift", "blur", "low_resolution", "jpeg"])
def test_transforms_keep_a_plain_colour_true(transform):
    """A red shirt stays red: no transform but erasing may change the colour of a uniform image."""
    red = torch.zeros(8, 3, 32, 16, dtype=torch.uint8)
    red[:, 0] = 200
    red[:, 1] = 30
    red[:, 2] = 40
    value = {"shift": 0.2, "blur": 1.0, "low_resolution": 1.0, "jpeg": 1.0}[transform]
    out = augment_batch(
        red,
        AugmentConfig(**{**OFF, transform: value, "scale_min": 0.8, "scale_max": 1.2}),
        torch.Generator().manual_seed(3),
    ).float()
    assert (out - red.float()).abs().max() <= 6  # JPEG rounding at most


def test_erasing_hides_a_patch():
    images = torch.full((4, 3, 32, 16), 128, dtype=torch.uint8)
    out = augment_batch(images, AugmentConfig(**{**OFF, "erasing": 1.0}), torch.Generator().manual_seed(0))
    changed = (out != images).any(dim=1).float().mean(dim=(1, 2))  # (B,) share of pixels changed
    assert ((changed > 0.01) & (changed < 0.3)).all()


def test_bad_augmentation_settings_are_refused():
    with pytest.raises(ValueError, match="probability"):
        AugmentConfig(blur=1.5)
    with pytest.raises(ValueError, match="scale_min"):
        AugmentConfig(scale_min=1.2, scale_max=1.0)
    with pytest.raises(ValueError, match="uint8"):
        augment_batch(torch.zeros(2, 3, 8, 4), AugmentConfig(), torch.Generator())


def test_balanced_attribute_loss_matches_jia_et_al():
    logits = torch.tensor([[2.0, -1.0], [0.5, 0.3]])
    targets = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    mask = torch.tensor([[True, True], [True, False]])
    ratio = positive_ratio(targets, mask)
    assert ratio.tolist() == pytest.approx([0.5, 0.0])
    expected = []
    for i in range(2):
        for j in range(2):
            if mask[i, j]:
                p = 1 / (1 + math.exp(-logits[i, j].item()))
                y = targets[i, j].item()
                bce = -(y * math.log(p) + (1 - y) * math.log(1 - p))
                expected.append(bce * (math.exp(1 - ratio[j]) if y else math.exp(ratio[j])))
    assert attribute_loss(logits, targets, mask, ratio).item() == pytest.approx(sum(expected) / len(expected), rel=1e-5)
    assert attribute_loss(logits, targets, mask).item() < attribute_loss(logits, targets, mask, ratio).item()


@pytest.mark.parametrize("frozen", ["head", "stem"])
def test_flip_test_averages_the_mirror_image_with_its_cells_flipped_back(frozen):
    model = create_model("tiny_grid", frozen_image_stages=frozen).eval()
    encoder = model.image_encoder
    x = torch.randn(3, 3, 64, 32)
    plain, mirrored = encoder.forward_stem(x), encoder.forward_stem(x.flip(-1))
    encoder.flip_test = True
    both = encoder.forward_stem(x)
    assert torch.allclose(both, (plain + encoder._unflip(mirrored)) / 2, atol=1e-6)
    if frozen == "head":  # the part grid's columns swap: cell (p, q) of the mirror is cell (p, Q-1-q)
        c_global, c_stripe = encoder._pooled_channels
        cells = mirrored[:, c_global:].view(3, encoder.num_stripes, encoder.stripe_columns, c_stripe)
        assert torch.equal(encoder._unflip(mirrored)[:, c_global:].view_as(cells)[:, :, 0], cells[:, :, -1])
    else:  # a stem trained live sees no TTA in training mode
        encoder.train()
        assert torch.allclose(encoder.forward_stem(x), plain, atol=1e-5)


def test_image_tuning_config_round_trips_and_refuses_bad_keys(tmp_path):
    cfg = load_config(
        "tiny",
        [
            "data.root=x",
            "image_tuning.epochs=3",
            "image_tuning.augment.blur=0.5",
            "image_tuning.frozen_image_stages=stage1",
        ],
    )
    assert cfg.image_tuning == ImageTuningConfig(
        epochs=3, frozen_image_stages="stage1", augment=AugmentConfig(blur=0.5)
    )
    assert config_from_dict(cfg.to_dict()).image_tuning == cfg.image_tuning
    assert "image_tuning" not in load_config("tiny", ["data.root=x"]).to_dict()  # off: old configs compare equal
    with pytest.raises(ConfigError, match="image_tuning.augment.colour"):
        load_config("tiny", ["data.root=x", "image_tuning.augment.colour=1"])
    with pytest.raises(ConfigError, match="probability"):
        load_config("tiny", ["data.root=x", "image_tuning.augment.jpeg=2"])
    assert load_config("peta", ["data.root=x"]).image_tuning.epochs > 0  # the shipped PETA config tunes


def test_tuning_trains_selects_on_val_and_writes_its_result(tiny_data, tmp_path):
    tuner = _tuner(tiny_data, tmp_path / "t")
    before = {k: v.clone() for k, v in tuner.model.image_encoder.state_dict().items()}
    record = tuner.run()
    after = tuner.model.image_encoder.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before if k.startswith("stages.1"))  # trained
    assert all(torch.equal(before[k], after[k]) for k in before if k.startswith("stages.0."))  # frozen stem
    history = [json.loads(line) for line in (tmp_path / "t" / "metrics.jsonl").read_text().splitlines()]
    assert [h["epoch"] for h in history] == [1, 2] and all(0 <= h["val_mA"] <= 100 for h in history)
    assert record["best"]["val_mA"] == max(h["val_mA"] for h in history)
    assert all(0 <= h["val_slot_accuracy"] <= 100 and 0 < h["val_slot_majority"] <= 100 for h in history)
    fresh = _tuner(tiny_data, tmp_path / "other").model
    load_tuned(fresh, tmp_path / "t" / "tuned.pt")
    assert all(
        torch.equal(v, fresh.state_dict()[k])
        for k, v in tuner.model.state_dict().items()
        if k.startswith(("image_encoder.", "image_head."))
    )


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"ema_decay": 0.9},
        {"feature_mixup_alpha": 0.4},
        {"progressive_sizes": [[1, 32, 16]]},
        {"mixstyle_p": 0.7, "mixstyle_stages": ["stage1"]},
    ],
    ids=["plain", "ema", "mixup", "progressive", "mixstyle"],
)
def test_a_killed_tuning_resumes_to_the_same_weights(tiny_data, tmp_path, monkeypatch, options):
    reference = _tuner(tiny_data, tmp_path / "ref", **options)
    reference.run()
    calls = {"n": 0}
    real = image_tuning.augment_batch

    def dying(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:  # mid second epoch-half: after the step-2 checkpoint, before the next
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(image_tuning, "augment_batch", dying)
    with pytest.raises(KeyboardInterrupt):
        _tuner(tiny_data, tmp_path / "killed", **options).run()
    monkeypatch.setattr(image_tuning, "augment_batch", real)
    resumed = _tuner(tiny_data, tmp_path / "killed", **options)
    resumed.run()
    for key, value in reference.model.state_dict().items():
        if key.startswith(("image_encoder.", "image_head.")):
            assert torch.allclose(value.float(), resumed.model.state_dict()[key].float(), atol=1e-6), key


def test_weight_average_matches_a_plain_loop():
    from minterpr.training.image_tuning import WeightAverage

    torch.manual_seed(0)
    model = create_model("tiny")
    average = WeightAverage(model, 0.8)
    key = next(k for k, v in average.state.items() if v.is_floating_point() and k.startswith("image_head."))
    expected = model.state_dict()[key].clone()
    for n in range(6):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        average.update(model)
        decay = min(0.8, (1 + n) / (10 + n))
        expected = decay * expected + (1 - decay) * model.state_dict()[key]
    torch.testing.assert_close(average.state[key], expected)


def test_ema_selects_the_averaged_weights_and_leaves_old_fingerprints_alone(tiny_data, tmp_path):
    plain = _tuner(tiny_data, tmp_path / "plain")
    averaged = _tuner(tiny_data, tmp_path / "ema", ema_decay=0.9)
    assert averaged.fingerprint != plain.fingerprint
    assert _tuner(tiny_data, tmp_path / "x", ema_decay=0.0).fingerprint == plain.fingerprint
    averaged.run()
    assert averaged.average.updates == 2 * averaged.steps_per_epoch
    tuned = image_tuning.load_checkpoint(tmp_path / "ema" / "tuned.pt")["weights"]
    last = image_tuning.load_checkpoint(tmp_path / "ema" / "last.pt")
    assert last["ema"]["updates"] == averaged.average.updates
    # the tuned weights are the average at the selected epoch, never the live weights of training
    assert any(not torch.equal(tuned[k], last["weights"][k]) for k in tuned if tuned[k].is_floating_point())


def test_a_result_tuned_otherwise_is_refused(tiny_data, tmp_path):
    _tuner(tiny_data, tmp_path / "t").run()
    with pytest.raises(Exception, match="another config"):
        _tuner(tiny_data, tmp_path / "t", lr=5e-4).run()


def test_the_trainer_tunes_before_its_stages(tiny_data, tmp_path):
    cfg = load_config(
        "tiny",
        [
            f"data.root={tiny_data}",
            "image_tuning.epochs=1",
            "image_tuning.batch_size=8",
            "stages.0.epochs=0",
            "stages.1.epochs=1",
            "stages.2.epochs=0",
            "progress=false",
            "loss_weights.balanced_attributes=true",
        ],
    )
    result = Trainer(cfg, tmp_path / "run").run()
    assert (tmp_path / "run" / "image_tuning" / "tuned.pt").is_file() and result.model_path.is_file()
    assert "image tuning" in (tmp_path / "run" / "train.log").read_text()
