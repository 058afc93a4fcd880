"""CLIP encoders and Long-CLIP positional-embedding stretching (77 -> 248 positions)."""

from __future__ import annotations

import string

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from minterpr.models.encoders import create_image_encoder, create_text_encoder  # noqa: E402
from minterpr.models.encoders.clip import stretch_position_table  # noqa: E402
from minterpr.models.encoders.tiny import save_tiny_clip  # noqa: E402


def long_clip_reference(table: torch.Tensor, keep: int = 20) -> torch.Tensor:
    """Long-CLIP's table written row by row from the paper's scheme (independent of the vectorised code)."""
    length, dim = table.shape
    out = torch.zeros(4 * length - 3 * keep, dim, dtype=table.dtype)
    out[:keep] = table[:keep]
    for i in range(length - 1 - keep):
        for w in range(4):  # 4 new rows per learned gap, blending w/4 of the next row
            out[keep + 4 * i + w] = (4 - w) / 4 * table[keep + i] + w / 4 * table[keep + i + 1]
    step = table[length - 1] - table[length - 2]
    for w in range(4):  # the last 4 rows continue the last learned step
        out[4 * length - 3 * keep - 4 + w] = table[length - 1] + w / 4 * step
    return out


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory: pytest.TempPathFactory):
    return save_tiny_clip(tmp_path_factory.mktemp("tiny_clip"))


@pytest.fixture(scope="module")
def stretched(clip_dir):
    return create_text_encoder("clip", model_dir=clip_dir).eval()


@pytest.fixture(scope="module")
def plain(clip_dir):
    return create_text_encoder("clip", model_dir=clip_dir, max_positions=77).eval()


def words(count: int) -> str:
    """``count`` one-letter words: each is exactly one token ("a</w>") for the tiny tokenizer."""
    return " ".join(string.ascii_lowercase[i % 26] for i in range(count))


def test_stretch_matches_long_clip_scheme():
    table = torch.randn(77, 8, generator=torch.Generator().manual_seed(0))
    new = stretch_position_table(table, 248)
    assert new.shape == (248, 8)
    torch.testing.assert_close(new, long_clip_reference(table), rtol=1e-5, atol=1e-6)


def test_stretch_rejects_shrinking_and_keeps_identity():
    table = torch.randn(77, 4)
    with pytest.raises(ValueError, match="cannot stretch"):
        stretch_position_table(table, 50)
    torch.testing.assert_close(stretch_position_table(table, 77), table)


def test_encoder_table_first_rows_kept(stretched, plain):
    new = stretched.text_model.embeddings.position_embedding.weight
    old = plain.text_model.embeddings.position_embedding.weight
    assert new.shape[0] == 248 and old.shape[0] == 77
    assert stretched.num_positions == 248 and stretched.max_length == 248
    assert torch.equal(new[:20], old[:20])
    assert not torch.allclose(new[20:77], old[20:77])  # the tail is spread, not copied
    assert stretched.text_model.embeddings.position_ids.shape[-1] == 248


def test_tokenizer_follows_table(stretched, plain):
    long_text = words(300)
    assert stretched.tokenize([long_text])["input_ids"].shape[1] == 248
    assert plain.tokenize([long_text])["input_ids"].shape[1] == 77


@torch.no_grad()
def test_long_text_uses_positions_beyond_77(stretched, plain):
    long_text, head = words(200), words(75)  # 200 tokens vs the first 75 (+ start/end = 77)
    assert stretched.tokenize([long_text])["input_ids"].shape[1] == 202
    assert not torch.allclose(stretched.encode([long_text]), stretched.encode([head]), atol=1e-4)
    # without stretching the long text is truncated to exactly the 77-token version
    torch.testing.assert_close(plain.encode([long_text]), plain.encode([head]))


@torch.no_grad()
def test_short_text_unchanged_by_stretching(stretched, plain):
    # causal attention + end-of-text pooling: < 20 tokens only ever see the kept rows
    texts = ["a man in red", "bag"]
    torch.testing.assert_close(stretched.encode(texts), plain.encode(texts))


def test_text_outputs_and_padding(stretched):
    tokens = stretched.tokenize(["a woman", words(30)])  # 1 + 6 characters + 1, and 1 + 30 + 1
    out = stretched(tokens)
    assert out["global"].shape == (2, 16)
    assert out["tokens"].shape == (2, 32, 16)
    assert out["mask"].dtype == torch.bool and out["mask"].sum(1).tolist() == [8, 32]


def test_freeze_kept_positions_zeroes_their_gradient(clip_dir):
    encoder = create_text_encoder("clip", model_dir=clip_dir, freeze_kept_positions=True)
    encoder(encoder.tokenize([words(60)]))["global"].sum().backward()
    grad = encoder.text_model.embeddings.position_embedding.weight.grad
    assert torch.count_nonzero(grad[:20]) == 0
    assert torch.count_nonzero(grad[20:62]) > 0


def test_clip_image_encoder_person_grid(clip_dir):
    encoder = create_image_encoder("clip", model_dir=clip_dir, image_size=(64, 32), num_stripes=4).eval()
    assert encoder.stages[0].position_embedding.shape[0] == 1 + 8 * 4  # 32x32 grid resized to 8x4
    x = torch.randn(2, 3, 64, 32)
    out = encoder(x)
    assert out["global"].shape == (2, 16) and out["stripes"].shape == (2, 4, 16)
    with pytest.raises(ValueError, match="patch grid"):
        encoder(torch.randn(1, 3, 32, 32))
    with pytest.raises(ValueError, match="multiple of the patch size"):
        create_image_encoder("clip", model_dir=clip_dir, image_size=(60, 32))


def test_clip_image_square_grid_matches_transformers(clip_dir):
    """At the checkpoint's own square size the staged encoder equals CLIPModel.get_image_features."""
    from transformers import CLIPModel

    reference = CLIPModel.from_pretrained(str(clip_dir), local_files_only=True).eval()
    encoder = create_image_encoder("clip", model_dir=clip_dir, image_size=(32, 32)).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        expected = reference.get_image_features(pixel_values=x)
        expected = getattr(expected, "pooler_output", expected)
        torch.testing.assert_close(encoder(x)["global"], expected, rtol=1e-4, atol=1e-5)
