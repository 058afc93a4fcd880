"""The text encoder's LRU cache (NeuralBackend._text_cache) returns the bits a fresh encoding gives:
a cached text's features equal those computed with an empty cache, whatever batch first computed
them, so a session's queries (and a replay's) do not depend on what was encoded before."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from minterpr.index.gallery_index import GalleryIndex  # noqa: E402
from minterpr.runtime.neural_backend import NeuralBackend  # noqa: E402
from minterpr.models import create_model  # noqa: E402
from minterpr.types import DescriptionTurn, GalleryImage, QATurn  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TEXTS = ["A woman in a long red coat carrying a black backpack.", "male", "Short dark hair, jeans."]


@pytest.fixture(scope="module")
def backend() -> NeuralBackend:
    torch.manual_seed(0)
    return NeuralBackend(create_model("tiny"))


def test_a_cached_text_is_bit_identical_to_a_fresh_one(backend):
    backend._text_cache.clear()
    alone = {text: backend._text_features([text])[0].clone() for text in TEXTS}  # each computed on its own
    backend._text_cache.clear()
    together = backend._text_features(TEXTS[::-1] + ["an unrelated, much longer text " * 4]).clone()  # one batch
    assert set(TEXTS) <= set(backend._text_cache)
    cached = backend._text_features(TEXTS)  # every row from the cache now
    for k, text in enumerate(TEXTS):
        assert torch.equal(cached[k], alone[text]), text  # cached (first computed in a padded batch) == fresh alone
        assert torch.equal(together[len(TEXTS) - 1 - k], alone[text])


def test_queries_do_not_depend_on_the_cache(backend):
    index = GalleryIndex(
        [GalleryImage(f"{i}.jpg", f"x:{i}") for i in range(3)], np.eye(3, backend.model.embed_dim, dtype=np.float32)
    )
    turns = [DescriptionTurn(TEXTS[0]), QATurn("What gender?", "male"), DescriptionTurn(TEXTS[2])]
    backend._text_cache.clear()
    cold = backend.encode_turns(turns, index)
    warm = backend.encode_turns(turns, index)  # every text cached
    backend._text_cache.clear()
    backend.encode_turns(turns[1:], index)  # a different history warmed the cache
    mixed = backend.encode_turns(turns, index)
    assert np.array_equal(cold, warm) and np.array_equal(cold, mixed)
