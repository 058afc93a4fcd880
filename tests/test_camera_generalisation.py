"""Camera generalisation switches: colour casts, MixStyle in the early stages (issue 37 item 2)."""
from __future__ import annotations

import pytest
import torch

import minterpr.training.image_tuning as image_tuning
from minterpr.errors import RunError
from minterpr.models.encoders import create_image_encoder
from minterpr.training.image_augment import AugmentConfig, augment_batch
from minterpr.training.mixstyle import mix_style, mixstyle

from support.tuning import make_tuner, tiny_data  # noqa: F401  (tiny_data is a fixture)

OFF = dict(flip=0.0, shift=0.0, scale_min=1.0, scale_max=1.0, blur=0.0, low_resolution=0.0, jpeg=0.0, erasing=0.0)


def _plain(value=(200, 100, 50), n=4):
    return torch.tensor(value, dtype=torch.uint8).view(1, 3, 1, 1).expand(n, 3, 16, 8).contiguous()


def test_colour_cast_changes_each_images_channels_differently_and_is_seeded():
    images = _plain()
    cast = augment_batch(images, AugmentConfig(**OFF, colour_cast=1.0), torch.Generator().manual_seed(0))
    again = augment_batch(images, AugmentConfig(**OFF, colour_cast=1.0), torch.Generator().manual_seed(0))
    assert torch.equal(cast, again)
    assert not torch.equal(cast, images)
    ratios = cast.float().mean((2, 3)) / images.float().mean((2, 3))  # (B, 3) per-channel change
    assert (ratios.std(1) > 1e-3).all()  # a cast, not a brightness change
    assert len({tuple(r.tolist()) for r in ratios}) == len(images)  # one cast per image
    off = augment_batch(images, AugmentConfig(**OFF), torch.Generator().manual_seed(0))
    assert torch.equal(off, images)


def test_colour_cast_settings_are_checked():
    with pytest.raises(ValueError, match="colour_cast"):
        AugmentConfig(colour_cast=1.5)
    with pytest.raises(ValueError, match="cast_gain"):
        AugmentConfig(cast_gain=1.0)


def test_mix_style_mixes_statistics_but_keeps_each_images_pattern():
    torch.manual_seed(0)
    x = torch.randn(8, 4, 6, 6) * torch.arange(1.0, 9.0).view(8, 1, 1, 1) + torch.arange(8.0).view(8, 1, 1, 1)
    y = mix_style(x, alpha=1.0)
    norm = lambda t: (t - t.mean((2, 3), keepdim=True)) / t.std((2, 3), keepdim=True)  # noqa: E731
    torch.testing.assert_close(norm(y), norm(x), atol=1e-3, rtol=1e-3)  # the pattern is the image's own
    assert not torch.allclose(y.std((2, 3)), x.std((2, 3)))  # the style is not


def test_mixstyle_acts_in_training_mode_only_and_leaves_no_hook():
    torch.manual_seed(0)
    encoder = create_image_encoder("tiny_cnn", pretrained=False)
    x = torch.randn(4, 3, 32, 16)
    encoder.eval()
    reference = encoder(x)["global"]
    with mixstyle(encoder, ["stage1"], p=1.0, alpha=0.1):
        assert torch.equal(encoder(x)["global"], reference)  # evaluation never mixes
        encoder.train()
        torch.manual_seed(1)
        mixed = encoder(x)["global"]
    torch.manual_seed(1)
    plain = encoder(x)["global"]
    assert not torch.allclose(mixed, plain)
    assert not encoder.stages[1]._forward_hooks  # removed on leaving
    with pytest.raises(ValueError, match="stages are"):
        with mixstyle(encoder, ["stage9"], p=1.0, alpha=0.1):
            pass


def test_mixstyle_switch_changes_the_tuned_weights_and_old_fingerprints_stay(tiny_data, tmp_path):
    plain = make_tuner(tiny_data, tmp_path / "plain")
    mixed = make_tuner(tiny_data, tmp_path / "mixed", mixstyle_p=1.0, mixstyle_stages=["stage1"])
    assert mixed.fingerprint != plain.fingerprint
    # switches left off do not change the fingerprint of tunings made before they existed
    assert make_tuner(tiny_data, tmp_path / "x", mixstyle_alpha=0.1,
                      augment=AugmentConfig(colour_cast=0.0, cast_gain=0.3)).fingerprint == plain.fingerprint
    assert "colour_cast" not in image_tuning._settings(plain.cfg)["augment"]
    assert make_tuner(tiny_data, tmp_path / "y", augment=AugmentConfig(colour_cast=0.5)).fingerprint != plain.fingerprint
    plain.run()
    mixed.run()
    a, b = plain.model.state_dict(), mixed.model.state_dict()
    assert any(not torch.equal(a[k], b[k]) for k in a if k.startswith("image_encoder.stages.2"))


def test_mixstyle_on_a_stage_the_encoder_lacks_is_refused(tiny_data, tmp_path):
    with pytest.raises(RunError, match="mixstyle_stages"):
        make_tuner(tiny_data, tmp_path / "t", mixstyle_p=0.5, mixstyle_stages=["stage5"])
