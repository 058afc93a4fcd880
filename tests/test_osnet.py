"""OSNet in the encoder zoo: the torchreid key map, the published export's features, variants."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from minterpr.models.encoders import create_image_encoder  # noqa: E402
from minterpr.models.encoders.osnet import OSNET_WIDTHS, OSNet, torchreid_key  # noqa: E402

WEIGHTS = Path(__file__).resolve().parents[2] / "shared" / "weights"
CUHK03 = Path(__file__).resolve().parents[2] / "shared" / "data" / "cuhk03" / "images"


def _shared(name: str) -> Path:
    path = WEIGHTS / name
    if not path.is_file():
        pytest.skip(f"{path} not present (../shared/weights is this workplace's, not the project's)")
    return path


def _cuhk03_batch(count: int) -> torch.Tensor:
    if not CUHK03.is_dir():
        pytest.skip(f"{CUHK03} not present (../shared/data is this workplace's, not the project's)")
    from minterpr.models.encoders import ImagePreprocess

    paths = sorted(CUHK03.glob("*.jpg"))[:count]
    return ImagePreprocess(size=(256, 128)).load_batch(paths)


def test_every_torchreid_key_maps_to_a_distinct_parameter():
    """The key map covers a whole torchreid x1.0 layout (built from our own module names in reverse)."""
    model = OSNet(width="x0_25")
    ours = set(model.state_dict())
    # a torchreid-style name for each of ours comes from the map's own examples per kind of key
    sample = [
        "conv1.conv.weight",
        "conv1.bn.running_var",
        "conv2.0.conv1.conv.weight",
        "conv2.0.conv2a.conv1.weight",
        "conv2.0.conv2a.conv2.weight",
        "conv2.0.conv2a.bn.bias",
        "conv3.1.conv2d.3.bn.weight",
        "conv4.0.gate.fc1.weight",
        "conv4.0.gate.fc2.bias",
        "conv3.0.conv3.bn.running_mean",
        "conv3.0.downsample.conv.weight",
        "conv2.2.0.conv.weight",
        "conv5.bn.weight",
        "fc.0.weight",
        "fc.1.num_batches_tracked",
    ]
    mapped = [torchreid_key(key) for key in sample]
    assert len(set(mapped)) == len(mapped) and set(mapped) <= ours
    with pytest.raises(KeyError, match="unexpected OSNet checkpoint key"):
        torchreid_key("conv9.0.weird")


def test_torchreid_file_loads_strictly_and_tells_people_apart():
    path = _shared("osnet_x0_25_msmt17.pth")
    encoder = create_image_encoder("osnet", weights=path).eval()
    x = _cuhk03_batch(20)  # identities 0000 and 0001: ten shots each, two cameras
    with torch.no_grad():
        features = torch.nn.functional.normalize(encoder(x)["global"], dim=1)  # (20, 512)
    similarity = features @ features.T
    same = torch.zeros(20, 20, dtype=torch.bool)
    same[:10, :10] = same[10:, 10:] = True
    off_diagonal = ~torch.eye(20, dtype=torch.bool)
    # the MSMT17 weights, never trained on CUHK03, still find the same person closer on average
    assert similarity[same & off_diagonal].mean() > similarity[~same].mean() + 0.1


def test_a_file_of_another_width_is_one_clear_error(tmp_path):
    path = _shared("osnet_x0_25_msmt17.pth")
    with pytest.raises(ValueError, match="does not fit OSNet x0_5/bn"):
        create_image_encoder("osnet", weights=path, width="x0_5")
    bad = tmp_path / "bad.pth"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="bad.pth: not a readable OSNet state dict"):
        create_image_encoder("osnet", weights=bad)
    with pytest.raises(ValueError, match="no packaged weights"):
        create_image_encoder("osnet", pretrained=True)


def _load_onnx_weights(model: OSNet, onnx_path: Path) -> None:
    """Put a BatchNorm-folded ONNX export's weights into a fused OSNet, conv by conv in order.

    The export runs each block's four streams before its gates, this module interleaves them, so
    the gate convolutions (named ``.../gate/...`` by the exporter) are paired separately, one per block.
    """
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(onnx_path)).graph
    weights = {init.name: torch.from_numpy(numpy_helper.to_array(init).copy()) for init in graph.initializer}
    onnx_convs, onnx_gates, seen = [], [], set()
    for node in graph.node:
        if node.op_type != "Conv":
            continue
        if "/gate/" not in node.name:  # the exporter names nodes by module path
            onnx_convs.append(node)
        elif node.input[1] not in seen:  # the shared gate: once per block
            seen.add(node.input[1])
            onnx_gates.append(node)
    order: list[torch.nn.Conv2d] = []
    hooks = [
        m.register_forward_hook(lambda mod, *_: order.append(mod))
        for m in model.modules()
        if isinstance(m, torch.nn.Conv2d)
    ]
    with torch.no_grad():
        model(torch.zeros(1, 3, 256, 128))
    for hook in hooks:
        hook.remove()
    gate_convs = {
        id(c) for m in model.modules() if m.__class__.__name__ == "ChannelGate" for c in (m.squeeze, m.excite)
    }
    ours_plain = [c for c in order if id(c) not in gate_convs]
    ours_gates = list(dict.fromkeys(c for c in order if id(c) in gate_convs))
    assert len(ours_plain) == len(onnx_convs) and len(ours_gates) == len(onnx_gates)
    with torch.no_grad():
        for conv, node in [*zip(ours_plain, onnx_convs), *zip(ours_gates, onnx_gates)]:
            conv.weight.copy_(weights[node.input[1]])
            if len(node.input) > 2:
                if conv.bias is None:
                    conv.bias = torch.nn.Parameter(torch.zeros(conv.out_channels))
                conv.bias.copy_(weights[node.input[2]])
        gemm = next(n for n in graph.node if n.op_type == "Gemm")
        norm = next(n for n in graph.node if n.op_type == "BatchNormalization")
        linear, batchnorm = model.feature[0], model.feature[1]
        linear.weight.copy_(weights[gemm.input[1]])
        linear.bias.copy_(weights[gemm.input[2]])
        for param, name in zip(("weight", "bias", "running_mean", "running_var"), norm.input[1:]):
            getattr(batchnorm, param).copy_(weights[name])


def test_the_network_reproduces_the_published_onnx_export():
    """Our OSNet x0.25 with the shared ONNX export's (folded) weights gives its features to 1e-4.

    The export is of another MSMT17 checkpoint than the shared .pth (their first convolutions
    correlate 0.81-0.97), so the architecture is checked on the export's own weights.
    """
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    onnx_path = _shared("osnet_x0_25_msmt17.onnx")
    model = OSNet(width="x0_25").fuse_batchnorm()
    _load_onnx_weights(model, onnx_path)
    x = _cuhk03_batch(6)
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    expected = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    with torch.no_grad():
        ours = model(x)["global"].numpy()
    assert abs(ours - expected).max() < 1e-4


@pytest.mark.parametrize("width", list(OSNET_WIDTHS))
@pytest.mark.parametrize("norm", ["bn", "ibn", "ain"])
def test_widths_and_instance_norm_variants(width, norm):
    encoder = create_image_encoder("osnet", width=width, norm=norm, num_stripes=4).eval()
    with torch.no_grad():
        out = encoder(torch.randn(2, 3, 64, 32))
    assert out["global"].shape == (2, 512) and out["stripes"].shape == (2, 4, OSNET_WIDTHS[width][3])
    has_instance_norm = any(isinstance(m, torch.nn.InstanceNorm2d) for m in encoder.modules())
    assert has_instance_norm == (norm != "bn")
    with pytest.raises(ValueError, match="must be one of x1_0, x0_75, x0_5, x0_25"):
        OSNet(width="x2")


def test_osnet_onnx_export_agrees_with_torch(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    encoder = create_image_encoder("osnet", norm="ibn").eval()
    x = torch.randn(2, 3, 128, 64)
    path = tmp_path / "osnet.onnx"

    class Global(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, images: torch.Tensor) -> torch.Tensor:
            return self.encoder(images)["global"]

    # eval() on the wrapper: the exporter restores the wrapper's mode on every child afterwards
    torch.onnx.export(
        Global().eval(),
        (x,),
        str(path),
        input_names=["images"],
        output_names=["features"],
        dynamic_axes={"images": {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    with torch.no_grad():
        expected = encoder(x)["global"].numpy()
    assert abs(session.run(None, {"images": x.numpy()})[0] - expected).max() < 1e-4
