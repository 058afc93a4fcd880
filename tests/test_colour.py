"""The colour branch: Lab conversion, palette memberships, packing with the stem, the head's use."""

from __future__ import annotations

import pytest
import torch

from minterpr.models import create_model
from minterpr.models.colour import PALETTE, PALETTE_NAMES, ColourBranch, rgb_to_lab
from minterpr.models.heads import ImageHead


def _normalised(rgb: torch.Tensor, mean: tuple[float, ...], std: tuple[float, ...]) -> torch.Tensor:
    return (rgb - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)


def test_rgb_to_lab_matches_published_values() -> None:
    # CIE Lab (D65) of sRGB primaries, as colour-science references list them
    cases = {
        (1.0, 1.0, 1.0): (100.0, 0.0, 0.0),
        (0.0, 0.0, 0.0): (0.0, 0.0, 0.0),
        (1.0, 0.0, 0.0): (53.24, 80.09, 67.20),
        (0.0, 0.0, 1.0): (32.30, 79.19, -107.86),
    }
    for rgb, lab in cases.items():
        assert torch.allclose(rgb_to_lab(torch.tensor(rgb)), torch.tensor(lab), atol=0.1), rgb


@pytest.mark.parametrize("name", PALETTE_NAMES)
def test_every_prototype_is_its_own_best_match(name: str) -> None:
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    branch = ColourBranch(mean=mean, std=std)
    rgb = torch.tensor(PALETTE[name], dtype=torch.float32).div(255).view(1, 3, 1, 1).expand(2, 3, 4, 2)
    membership = branch(_normalised(rgb, mean, std))  # (2, K, 4, 2)
    assert membership.shape == (2, len(PALETTE), 4, 2)
    assert torch.allclose(membership.sum(1), torch.ones(2, 4, 2), atol=1e-5)
    assert PALETTE_NAMES[int(membership[0, :, 0, 0].argmax())] == name


def test_branch_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="sigma"):
        ColourBranch(mean=(0, 0, 0), std=(1, 1, 1), sigma=0)
    with pytest.raises(ValueError, match="grid"):
        ColourBranch(mean=(0, 0, 0), std=(1, 1, 1), grid=(0, 4))


def test_pooling_large_inputs_keeps_the_stripe_histograms() -> None:
    torch.manual_seed(0)
    mean, std = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)
    blocks = torch.rand(2, 3, 8, 4).repeat_interleave(32, dim=2).repeat_interleave(32, dim=3)  # garment-like patches
    pixels = _normalised(blocks + 0.02 * torch.randn(2, 3, 256, 128), mean, std)
    fast = ColourBranch(mean=mean, std=std)(pixels)  # pooled to 64 x 32 first
    full = ColourBranch(mean=mean, std=std, grid=(256, 128))(pixels)
    assert fast.shape[-2:] == (64, 32) and full.shape[-2:] == (256, 128)

    def stripes(m: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.adaptive_avg_pool2d(m, (8, 1))

    assert (stripes(fast) - stripes(full)).abs().max() < 0.05


def test_stripes_follow_the_layout_of_the_image() -> None:
    model = create_model("tiny").eval()  # tiny: colour_stripes = 4
    prep = model.preprocess
    rgb = torch.zeros(1, 3, 64, 32)
    rgb[:, 0, :32] = 200 / 255  # red top half
    rgb[:, 2, 32:] = 200 / 255  # blue bottom half
    packed = model.image_stem(_normalised(rgb, prep.mean, prep.std))
    _, colour = model.unpack_stem(packed)  # (1, 4, K)
    names = [PALETTE_NAMES[int(i)] for i in colour[0].argmax(-1)]
    assert names[:2] == ["red", "red"] and names[2:] == ["blue", "blue"]


def test_packed_stem_round_trips_and_matches_the_direct_path() -> None:
    torch.manual_seed(0)
    model = create_model("tiny").eval()
    pixels = torch.randn(3, 3, 64, 32)
    packed = model.image_stem(pixels)
    assert packed.dim() == 2
    stem, colour = model.unpack_stem(packed)
    assert torch.equal(stem, model.image_encoder.forward_stem(pixels))
    assert colour is not None and colour.shape == (3, 4, len(PALETTE))
    fresh = create_model("tiny").eval()  # a stem read from a cache: shape not yet known
    fresh.load_state_dict(model.state_dict())
    direct = model.encode_images(pixels)["embedding"]
    assert torch.allclose(fresh.encode_image_features(packed)["embedding"], direct, atol=1e-6)
    with pytest.raises(ValueError, match="packed stem output"):
        model.encode_image_features(packed[:, :-1])


def test_colour_changes_the_embedding_and_the_attributes() -> None:
    torch.manual_seed(0)
    model = create_model("tiny").eval()
    pixels = torch.randn(2, 3, 64, 32)
    packed = model.image_stem(pixels)
    stem, colour = model.unpack_stem(packed)
    other = torch.cat([stem.flatten(1), colour.flip(-1).flatten(1)], dim=1)  # same stem, other colours
    a, b = model.encode_image_features(packed), model.encode_image_features(other)
    assert not torch.allclose(a["embedding"], b["embedding"])
    assert not torch.allclose(a["attribute_logits"], b["attribute_logits"])


def test_model_without_colour_branch_keeps_the_plain_stem() -> None:
    model = create_model("tiny", colour_stripes=0).eval()
    pixels = torch.randn(2, 3, 64, 32)
    assert torch.equal(model.image_stem(pixels), model.image_encoder.forward_stem(pixels))
    assert model.colour_branch is None and model.image_head.colour_proj is None


def test_head_needs_colour_when_built_with_it() -> None:
    head = ImageHead(
        global_dim=8, stripe_dim=8, num_stripes=2, embed_dim=8, label_slots=[0, 1], colour_dim=5, colour_stripes=3
    )
    with pytest.raises(ValueError, match="colour histograms"):
        head(torch.randn(2, 8), torch.randn(2, 2, 8))
    assert head(torch.randn(2, 8), torch.randn(2, 2, 8), torch.rand(2, 3, 5))["embedding"].shape == (2, 8)
    with pytest.raises(ValueError, match="both be 0"):
        ImageHead(global_dim=8, stripe_dim=8, num_stripes=2, embed_dim=8, label_slots=[0], colour_dim=5)
