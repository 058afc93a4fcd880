"""ImagePreprocess's one multiply-add from 8-bit pixels agrees with the plain formula."""

import numpy as np
import pytest
import torch
from PIL import Image

from minterpr.models.encoders.preprocess import IMAGENET_MEAN, IMAGENET_STD, PIL_FILTERS, ImagePreprocess


def reference(prep: ImagePreprocess, image: Image.Image) -> torch.Tensor:
    """The formula as written: resize, scale to [0, 1], subtract the mean, divide by the std."""
    height, width = prep.size
    array = np.asarray(image.convert("RGB").resize((width, height), PIL_FILTERS[prep.interpolation]), np.float32)
    tensor = torch.from_numpy(array / 255.0).permute(2, 0, 1)
    return (tensor - torch.tensor(prep.mean).view(3, 1, 1)) / torch.tensor(prep.std).view(3, 1, 1)


@pytest.mark.parametrize(
    "prep",
    [
        ImagePreprocess(size=(256, 128)),
        ImagePreprocess(size=(160, 80), mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), interpolation="bicubic"),
        ImagePreprocess(size=(33, 17), mean=IMAGENET_MEAN[::-1], std=IMAGENET_STD[::-1], interpolation="nearest"),
    ],
)
def test_fast_normalisation_matches_the_formula(prep: ImagePreprocess) -> None:
    rng = np.random.default_rng(0)
    for shape in ((105, 41, 3), (300, 120, 3), (7, 5, 3)):
        image = Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8))
        fast = prep(image)
        assert fast.dtype == torch.float32 and fast.shape == (3, *prep.size) and fast.is_contiguous()
        torch.testing.assert_close(fast, reference(prep, image), atol=2e-6, rtol=0)


def test_extremes_map_to_the_formula_bounds() -> None:
    prep = ImagePreprocess(size=(4, 2))
    black, white = (prep(Image.new("RGB", (2, 4), colour)) for colour in ((0, 0, 0), (255, 255, 255)))
    mean, std = torch.tensor(IMAGENET_MEAN).view(3, 1, 1), torch.tensor(IMAGENET_STD).view(3, 1, 1)
    torch.testing.assert_close(black, (-mean / std).expand(3, 4, 2), atol=1e-6, rtol=0)
    torch.testing.assert_close(white, ((1 - mean) / std).expand(3, 4, 2), atol=1e-6, rtol=0)
