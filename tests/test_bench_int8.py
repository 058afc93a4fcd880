"""``benchmarks/bench_int8.py``: int8 static quantisation of the image models, measured against float32."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime.quantization")
pytest.importorskip("onnx")

from support.datasets import make_tiny_dataset  # noqa: E402
from support.helpers import load_benchmark  # noqa: E402


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_int8")


def test_the_attribute_model_is_quantised_and_measured(bench, tiny_run, tmp_path, capsys, one_torch_thread):
    data = make_tiny_dataset(tmp_path / "data")
    out = tmp_path / "int8.json"
    argv = ["--data", str(data), "--run", str(tiny_run), "--appearance", "none", "--calibration", "8"]
    assert (
        bench.main([*argv, "--count", "8", "--batch", "4", "--threads", "1", "--repeats", "1", "--json", str(out)]) == 0
    )
    (row,) = json.loads(out.read_text())["rows"]
    assert row["model"] == "attribute" and row["calibration_crops"] == 8 and row["test_crops"] > 8
    assert row["float32_crops_s"] > 0 and row["int8_crops_s"] > 0 and row["int8_bytes"] > 0
    assert 0.5 < row["cosine_mean"] <= 1.0001 and row["cosine_min"] <= row["cosine_mean"]
    assert 0.5 < row["label_decisions_unchanged"] <= 1.0
    assert 0 <= row["float32"]["mA"] <= 100 and 0 <= row["int8"]["mA"] <= 100
    capsys.readouterr()
    assert bench.main(["--data", str(tmp_path / "absent"), "--run", str(tiny_run), "--appearance", "none"]) == 2
    assert "bench_int8:" in capsys.readouterr().err
    assert bench.main([*argv, "--count", "0"]) == 2  # before any work
    assert "--count must be >= 1, got 0" in capsys.readouterr().err
