"""Open any image Pillow can read as an 8-bit RGB picture, or fail with one clear ImageError.

Every place that feeds pixels to a model (encoder preprocessing, training batches, rendering)
goes through :func:`load_rgb`, so an odd file is handled the same way everywhere:

* **modes**: 16-bit and 32-bit greyscale (``I;16``, ``I;16B``, ``I``, ``F``) are scaled from
  the range they really hold, not clipped at 255 (see :func:`to_rgb`); CMYK, YCbCr, LAB, HSV,
  palette and 1-bit images are converted; images with transparency (``RGBA``, ``LA``, ``PA``,
  a palette or greyscale with a transparent colour) are composited on :data:`BACKGROUND`;
* **orientation**: the EXIF orientation tag is applied, so a phone picture stands upright;
* **errors**: decoding happens inside the call, so a truncated file fails here and not later;
  a missing file, a file that is no image, a truncated or corrupt one and one too large to
  decode safely (Pillow's decompression-bomb limit, ``PIL.Image.MAX_IMAGE_PIXELS``) each
  raise :class:`~minterpr.errors.ImageError` naming the file and the reason.

Example:
    >>> import os, tempfile
    >>> from PIL import Image
    >>> path = os.path.join(tempfile.mkdtemp(), "grey16.png")
    >>> Image.new("I;16", (4, 8), 65535).save(path)   # 16-bit white
    >>> image = load_rgb(path)
    >>> image.mode, image.size, image.getpixel((0, 0))
    ('RGB', (4, 8), (255, 255, 255))
    >>> load_rgb(os.path.join(os.path.dirname(path), "missing.png"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    minterpr.errors.ImageError: .../missing.png: image not found
"""

from __future__ import annotations

import os

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from minterpr.errors import ImageError

# Transparent pixels become this colour: the ImageNet mean, which the encoders' normalisation
# maps to zero, so a cut-out person is not pasted on a background the network reads as content.
BACKGROUND = (124, 116, 104)

_ALPHA_MODES = frozenset({"RGBA", "LA", "PA", "RGBa", "La"})
_SIXTEEN_BIT = 65535


def _scaled_to_8bit(array: np.ndarray, mode: str) -> np.ndarray:
    """uint8 pixels of a 16/32-bit integer or float greyscale array, by the range it holds.

    ``I;16*``: the 16-bit range (v / 257, so 16-bit and 8-bit versions of a picture agree).
    ``I``: the 16-bit range when every value is in 0..65535 (Pillow opens 16-bit files of
    some formats as ``I``), else the values' own minimum..maximum. ``F``: 0..1 when the values
    lie there, else minimum..maximum. Non-finite values count as the minimum.
    """
    values = array.astype(np.float64)
    finite = np.isfinite(values)
    if not finite.all():
        values = np.where(finite, values, np.nan)
        low = np.nanmin(values) if finite.any() else 0.0
        values = np.nan_to_num(values, nan=low)
    low, high = (float(values.min()), float(values.max())) if values.size else (0.0, 0.0)
    if mode.startswith("I;16") or (mode == "I" and low >= 0 and high <= _SIXTEEN_BIT):
        lo, hi = 0.0, float(_SIXTEEN_BIT)
    elif mode == "F" and low >= 0 and high <= 1:
        lo, hi = 0.0, 1.0
    else:
        lo, hi = low, high
    if hi <= lo:  # a flat picture: keep its level if it is within 0..255, else mid-grey
        level = lo if 0 <= lo <= 255 else 128
        return np.full(values.shape, round(level), dtype=np.uint8)
    return np.clip(np.rint((values - lo) * (255.0 / (hi - lo))), 0, 255).astype(np.uint8)


def to_rgb(image: Image.Image) -> Image.Image:
    """An 8-bit RGB copy of a decoded image of any mode (see the module doc for each mode).

    >>> to_rgb(Image.new("I;16", (2, 2), 257 * 100)).getpixel((0, 0))
    (100, 100, 100)
    >>> to_rgb(Image.new("RGBA", (2, 2), (255, 0, 0, 0))).getpixel((0, 0)) == BACKGROUND
    True
    """
    mode = image.mode
    if mode == "RGB":
        return image.copy()
    if mode.startswith("I") or mode == "F":  # I, I;16, I;16B, I;16L, I;16N, F
        grey = _scaled_to_8bit(np.asarray(image), mode)
        return Image.fromarray(grey, "L").convert("RGB")
    if mode in _ALPHA_MODES or "transparency" in image.info:
        if mode == "La":  # premultiplied: Pillow only converts it to LA
            image = image.convert("LA")
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (*BACKGROUND, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")


def _check_size(image: Image.Image, path: str) -> None:
    limit = Image.MAX_IMAGE_PIXELS
    if limit is not None and image.width * image.height > limit:
        raise ImageError(
            path,
            f"too large to decode safely: {image.width}x{image.height} pixels is over "
            f"the limit of {limit:,} (PIL.Image.MAX_IMAGE_PIXELS, a decompression-bomb guard)",
        )


def load_rgb(path: str | os.PathLike[str]) -> Image.Image:
    """Open, fully decode and convert the image at ``path``: an 8-bit RGB image, upright.

    Raises :class:`~minterpr.errors.ImageError` (an OSError) naming ``path`` and the reason:
    not found, a folder, not readable, not an image, truncated, corrupt or too large.
    """
    name = os.fspath(path)
    try:
        with Image.open(name) as image:
            _check_size(image, name)
            image.load()  # decode now, inside the try: a truncated file fails here, not in a later step
            upright = ImageOps.exif_transpose(image)
            return to_rgb(upright if upright is not None else image)
    except ImageError:
        raise
    except FileNotFoundError:
        raise ImageError(name, "image not found") from None
    except IsADirectoryError:
        raise ImageError(name, "is a folder, not an image file") from None
    except PermissionError:
        raise ImageError(name, "permission denied") from None
    except Image.DecompressionBombError as exc:
        raise ImageError(name, f"too large to decode safely: {exc} (PIL.Image.MAX_IMAGE_PIXELS)") from None
    except UnidentifiedImageError:
        raise ImageError(name, "not an image (or in a format Pillow cannot read)") from None
    except MemoryError:
        raise ImageError(name, "too large: out of memory while decoding") from None
    except Exception as exc:  # Pillow's decoders raise OSError, SyntaxError, EOFError, struct.error ...
        text = str(exc)
        if "truncated" in text.lower() or isinstance(exc, EOFError):
            raise ImageError(name, f"truncated or damaged image file ({text or type(exc).__name__})") from None
        raise ImageError(name, f"cannot decode the image: {type(exc).__name__}: {text}") from None
