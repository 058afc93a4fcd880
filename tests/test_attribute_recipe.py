"""The attribute recipe's options (issue 24): BatchNorm after the attribute classifier,
per-label feature mixup, progressive input sizes. Each is off by default, and off changes nothing."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from minterpr.models import ModelConfig, create_model, load_model, save_model
from minterpr.models.config import MODEL_CONFIGS
from minterpr.models.heads import SlotAttributeHead
from minterpr.models.io import load_model_dir, save_model_dir

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _tiny(seed: int = 0, **overrides):
    torch.manual_seed(seed)
    return create_model("tiny", **overrides)


# ----------------------------------------------------------------------------- BatchNorm after the classifier
def test_logit_norm_off_keeps_the_config_dict_and_the_weights_of_models_made_before_it():
    config = MODEL_CONFIGS.create("tiny")
    assert "attribute_logit_norm" not in config.to_dict()  # old dicts, fingerprints and caches stay the same
    old = {k: v for k, v in config.to_dict().items()}
    assert ModelConfig.from_dict(old) == config and not ModelConfig.from_dict(old).attribute_logit_norm
    on = config.replace(attribute_logit_norm=True)
    assert on.to_dict()["attribute_logit_norm"] is True and ModelConfig.from_dict(on.to_dict()) == on
    plain, normed = _tiny(), _tiny(attribute_logit_norm=True)
    assert not any("logit_norm" in k for k in plain.state_dict())
    extra = sorted(set(normed.state_dict()) - set(plain.state_dict()))
    assert extra and all(k.startswith("image_head.attributes.logit_norm.") for k in extra)
    # same seed: every weight the two share is the same (the norm is built last)
    assert all(torch.equal(v, normed.state_dict()[k]) for k, v in plain.state_dict().items())


def test_logit_norm_is_a_batch_norm_of_the_plain_scores():
    torch.manual_seed(0)
    head = SlotAttributeHead(8, [0, 0, 1, 1, 1], logit_norm=True)
    tokens = torch.randn(6, 5, 8)
    with torch.no_grad():
        head.logit_norm.weight.copy_(torch.tensor([1.0, 2.0, 0.5, 1.0, 3.0]))
        head.logit_norm.bias.copy_(torch.tensor([0.0, -1.0, 0.2, 0.0, 1.0]))
    plain = SlotAttributeHead(8, [0, 0, 1, 1, 1])
    plain.load_state_dict({k: v for k, v in head.state_dict().items() if "logit_norm" not in k})
    scores = plain(tokens)  # (B, L) the classifier's scores
    mean, var = scores.mean(0), scores.var(0, unbiased=False)
    expected = (scores - mean) / torch.sqrt(var + 1e-5) * head.logit_norm.weight + head.logit_norm.bias
    torch.testing.assert_close(head(tokens), expected)
    head.eval()  # eval: the running statistics, one momentum step from (0, 1)
    running_mean, running_var = 0.1 * mean, 0.9 + 0.1 * scores.var(0, unbiased=True)
    torch.testing.assert_close(head.logit_norm.running_mean, running_mean.detach())
    expected = (scores - running_mean) / torch.sqrt(running_var + 1e-5) * head.logit_norm.weight + head.logit_norm.bias
    torch.testing.assert_close(head(tokens), expected)
    head.train()
    assert head(tokens[:1]).shape == (1, 5)  # one image in training: running statistics, no failure


def test_a_model_with_logit_norm_saves_loads_calibrates_and_exports(tmp_path):
    model = _tiny(attribute_logit_norm=True)
    pixels = torch.randn(4, 3, *model.config.image_size)
    model.train()
    with torch.no_grad():
        for _ in range(3):  # running statistics away from their initial (0, 1)
            model.encode_images(pixels)
    model.eval()
    with torch.no_grad():
        logits = model.encode_images(pixels)["attribute_logits"]
    save_model(model, tmp_path / "model.pt")
    again = load_model(tmp_path / "model.pt")
    assert again.config.attribute_logit_norm
    with torch.no_grad():
        torch.testing.assert_close(again.encode_images(pixels)["attribute_logits"], logits)
    save_model_dir(model, tmp_path / "dir", reference_pretrained=False)
    from_dir, _ = load_model_dir(tmp_path / "dir")
    with torch.no_grad():
        torch.testing.assert_close(from_dir.encode_images(pixels)["attribute_logits"], logits)
    # calibration divides the (normed) logits by each slot's temperature
    model.set_attribute_temperature({"gender": 2.0})
    from minterpr.language.ontology import ONTOLOGY

    columns = ONTOLOGY.slot_columns()["gender"]
    probabilities = model.attribute_probabilities(logits)
    torch.testing.assert_close(probabilities[:, columns], torch.sigmoid(logits[:, columns] / 2.0))


def test_a_model_with_logit_norm_exports_to_onnx_that_agrees():
    pytest.importorskip("onnxruntime")
    from minterpr.models.onnx_export import OnnxImageEngine, check_engine, export_image_tower

    model = _tiny(attribute_logit_norm=True)
    with torch.no_grad():
        model.image_head.attributes.logit_norm.running_mean.uniform_(-1, 1)
        model.image_head.attributes.logit_norm.running_var.uniform_(0.5, 2)
    model.eval()
    assert check_engine(OnnxImageEngine(export_image_tower(model)), model) < 1e-4
