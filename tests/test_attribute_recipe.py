"""The attribute recipe's options (issue 24): BatchNorm after the attribute classifier,
per-label feature mixup, progressive input sizes. Each is off by default, and off changes nothing."""

from __future__ import annotations


import pytest
import torch

from minterpr.models import ModelConfig, create_model, save_model
from minterpr.models.config import MODEL_CONFIGS
from minterpr.models.heads import SlotAttributeHead
from minterpr.models.io import load_model
from minterpr.models.model_dir import load_model_dir, save_model_dir
from minterpr.training.config import ConfigError, ImageTuningConfig, load_config

from support.tuning import make_tuner as _tuner, tiny_data  # noqa: F401  (tiny_data is a fixture)

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
    from minterpr.models.onnx_export import OnnxImageEngine, check_engine, export_onnx_image_tower

    model = _tiny(attribute_logit_norm=True)
    with torch.no_grad():
        model.image_head.attributes.logit_norm.running_mean.uniform_(-1, 1)
        model.image_head.attributes.logit_norm.running_var.uniform_(0.5, 2)
    model.eval()
    assert check_engine(OnnxImageEngine(export_onnx_image_tower(model)), model) < 1e-4


# ----------------------------------------------------------------------------- per-label feature mixup
def test_label_mix_is_seeded_and_pairs_each_label_with_its_own_partner():
    from minterpr.training.feature_mixup import LabelMix

    a, b = LabelMix.draw(16, 30, 0.4, seed=3), LabelMix.draw(16, 30, 0.4, seed=3)
    assert torch.equal(a.partner, b.partner) and torch.equal(a.weight, b.weight)
    assert not torch.equal(a.partner, LabelMix.draw(16, 30, 0.4, seed=4).partner)
    assert all(sorted(a.partner[:, l].tolist()) == list(range(16)) for l in range(30))  # permutations
    assert len({tuple(a.partner[:, l].tolist()) for l in range(30)}) > 1  # independent across labels
    targets = torch.randint(0, 2, (16, 30)).float()
    mask = torch.rand(16, 30) > 0.2
    mixed, known = a.targets(targets, mask)
    for i, l in ((0, 0), (5, 7), (15, 29)):
        j, lam = a.partner[i, l], a.weight[i, l]
        assert mixed[i, l].item() == pytest.approx((lam * targets[i, l] + (1 - lam) * targets[j, l]).item())
        assert known[i, l].item() == bool(mask[i, l] and mask[j, l])
    with pytest.raises(ValueError, match="alpha > 0"):
        LabelMix.draw(4, 3, 0.0, seed=0)


@pytest.mark.parametrize("logit_norm", [False, True])
def test_mixing_the_scores_is_mixing_each_labels_pooled_feature(logit_norm):
    """The fast path (mix the (B, L) scores) against the plain one (mix every label's slot feature)."""
    from minterpr.training.feature_mixup import LabelMix

    torch.manual_seed(0)
    slots = [0, 0, 1, 1, 1, 2]
    head = SlotAttributeHead(8, slots, logit_norm=logit_norm)
    tokens = torch.randn(5, 4, 8)
    mix = LabelMix.draw(5, len(slots), 0.5, seed=1)
    normed = head.norm(tokens)
    scores = torch.einsum("sd,btd->bst", head.slot_queries @ head.keys.weight, normed) / 8**0.5
    features = (scores.softmax(-1) @ normed)[:, slots]  # (B, L, D): the feature fed to each label
    mixed = torch.empty_like(features)
    for i in range(5):
        for l in range(len(slots)):
            lam = mix.weight[i, l]
            mixed[i, l] = lam * features[i, l] + (1 - lam) * features[mix.partner[i, l], l]
    expected = (mixed * head.label_weight).sum(-1) + head.label_bias
    if logit_norm:
        expected = torch.nn.functional.batch_norm(
            expected, None, None, head.logit_norm.weight, head.logit_norm.bias, training=True
        )
    torch.testing.assert_close(head(tokens, mix=mix), expected)


def test_feature_mixup_off_keeps_the_fingerprint_and_on_trains_on_soft_targets(tiny_data, tmp_path, monkeypatch):
    from minterpr.training import image_tuning

    plain = _tuner(tiny_data, tmp_path / "plain")
    assert _tuner(tiny_data, tmp_path / "x", feature_mixup_alpha=0.0).fingerprint == plain.fingerprint
    assert "feature_mixup_alpha" in image_tuning.LATER_FIELDS
    mixed = _tuner(tiny_data, tmp_path / "mix", feature_mixup_alpha=0.4)
    assert mixed.fingerprint != plain.fingerprint
    seen = []
    real = image_tuning.attribute_loss
    monkeypatch.setattr(
        image_tuning,
        "attribute_loss",
        lambda logits, targets, mask, ratio: seen.append(targets) or real(logits, targets, mask, ratio),
    )
    mixed.run()
    assert seen and all(((t > 0) & (t < 1)).any() for t in seen)  # soft targets every step
    plain.run()
    assert ((seen[-1] == 0) | (seen[-1] == 1)).all()  # plain: hard targets
    assert any(
        not torch.equal(v, plain.model.state_dict()[k])
        for k, v in mixed.model.state_dict().items()
        if k.startswith("image_head.attributes.")
    )
    with pytest.raises(ValueError, match="feature_mixup_alpha"):
        ImageTuningConfig(feature_mixup_alpha=-1.0)
    with pytest.raises(ConfigError, match="feature_mixup_alpha"):
        load_config("tiny", ["data.root=x", "image_tuning.feature_mixup_alpha=-0.5"])


# ----------------------------------------------------------------------------- progressive input sizes
def test_resize_batch_shrinks_and_keeps_a_plain_colour():
    from minterpr.training.labelled_images import resize_batch

    red = torch.zeros(2, 3, 64, 32, dtype=torch.uint8)
    red[:, 0], red[:, 1], red[:, 2] = 200, 30, 40
    small = resize_batch(red, (32, 16))
    assert small.shape == (2, 3, 32, 16) and small.dtype == torch.uint8 and torch.equal(small, red[:, :, :32, :16])
    assert resize_batch(red, None) is red and resize_batch(red, (64, 32)) is red


def test_progressive_sizes_train_small_first_and_validate_at_the_models_size(tiny_data, tmp_path):
    plain = _tuner(tiny_data, tmp_path / "plain")
    assert _tuner(tiny_data, tmp_path / "x", progressive_sizes=[]).fingerprint == plain.fingerprint
    tuner = _tuner(tiny_data, tmp_path / "p", epochs=3, progressive_sizes=[[1, 32, 16], [1, 48, 24]])
    assert tuner.fingerprint != _tuner(tiny_data, tmp_path / "y", epochs=3).fingerprint
    seen = []  # (training?, H, W) of every forward pass
    real = tuner.model.encode_images
    tuner.model.encode_images = lambda pixels, *a, **k: (
        seen.append((tuner.model.training, *pixels.shape[-2:])) or real(pixels, *a, **k)
    )
    record = tuner.run()
    steps = tuner.steps_per_epoch
    trained = [s[1:] for s in seen if s[0]]
    assert trained == [(32, 16)] * steps + [(48, 24)] * steps + [(64, 32)] * steps
    assert {s[1:] for s in seen if not s[0]} == {(64, 32)}  # validation at the model's size
    assert [h.get("input_size") for h in record["history"]] == [[32, 16], [48, 24], None]


def test_bad_progressive_sizes_are_refused(tiny_data, tmp_path):
    with pytest.raises(ValueError, match="more than epochs"):
        ImageTuningConfig(epochs=2, progressive_sizes=[[2, 32, 16], [1, 48, 24]])
    with pytest.raises(ConfigError, match=r"progressive_sizes\[0\]"):
        load_config("tiny", ["data.root=x", "image_tuning.progressive_sizes=[[1, 32]]"])
    with pytest.raises(Exception, match="exceed the model's input size 64x32"):
        _tuner(tiny_data, tmp_path / "big", progressive_sizes=[[1, 128, 64]])


# ----------------------------------------------------------------------------- the comparison script
def test_bench_recipe_tunes_each_setting_and_prints_its_table(tiny_data, tmp_path, capsys):
    import json

    from support.helpers import load_benchmark

    bench = load_benchmark("bench_recipe")
    out = tmp_path / "runs"
    argv = [
        "--data",
        str(tiny_data),
        "--out",
        str(out),
        "--config",
        "tiny",
        "--set",
        "image_tuning.epochs=2",
        "--set",
        "image_tuning.batch_size=8",
        "--setting",
        "plain",
        "--setting",
        "all three",
        "model.attribute_logit_norm=true",
        "image_tuning.feature_mixup_alpha=0.4",
        "image_tuning.progressive_sizes=[[1,32,16]]",
        "--json",
        str(tmp_path / "rows.json"),
    ]
    capsys.readouterr()
    assert bench.main(argv) == 0
    printed = capsys.readouterr().out
    lines = printed.strip().splitlines()
    assert lines[0].startswith("| setting | val mA | test mA | PETA-35 mA") and len(lines) == 4
    assert all(f"| {name} |" in printed for name in ("plain", "all three"))
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert [r["setting"] for r in rows] == ["plain", "all three"]
    assert all(0 <= r["val_mA"] <= 100 and 0 <= r["test_mA"] <= 100 for r in rows)
    for r in rows:  # the ranking, instance and minutes columns come from the run's own records
        tuned = (out / r["setting"].replace(" ", "_") / "image_tuning" / "metrics.jsonl").read_text().splitlines()
        assert r["tuning_minutes"] == pytest.approx(json.loads(tuned[-1])["seconds"] / 60)  # a fast CI may round to 0
        report = json.loads((out / r["setting"].replace(" ", "_") / "attributes_test.json").read_text())
        assert r["test_f1"] == report["instance_based"]["f1"]
        assert (r["test_slot"], r["test_majority"]) == (
            report["slot_mean"]["accuracy"],
            report["slot_mean"]["majority_accuracy"],
        )
        assert f"| {r['test_slot']:.1f} / {r['test_majority']:.1f} |" in printed
        aucs = [label["auc"] for label in report["labels"] if label["auc"] is not None]
        assert r["test_auc"] == pytest.approx(sum(aucs) / len(aucs))
    history = [
        json.loads(line) for line in (out / "all_three" / "image_tuning" / "metrics.jsonl").read_text().splitlines()
    ]
    assert [h.get("input_size") for h in history] == [[32, 16], None]  # the setting's overrides reached the tuning
    config = (out / "all_three" / "config.yaml").read_text()
    assert "attribute_logit_norm: true" in config and "feature_mixup_alpha: 0.4" in config
    assert "attribute_logit_norm" not in (out / "plain" / "config.yaml").read_text()
    # a second call reuses the finished runs and their reports: the same table
    assert bench.main(argv) == 0 and capsys.readouterr().out == printed
