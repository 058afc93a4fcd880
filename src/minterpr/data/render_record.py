"""Draw one MInterPEDES record as a picture: the target, each reference image and the dialogue.

The layout reads top to bottom like the conversation: the target image (green frame, labelled
TARGET and its identity) beside the initial description and the text Q&A turns, then one row
per reference turn: the reference image (red frame, "not the target") beside the user's
corrective feedback. Pillow only, so it works wherever the data tools do.

Example:
    >>> from minterpr.data.render_record import read_record, render_record  # doctest: +SKIP
    >>> sample, count = read_record("data/synth/test.jsonl", 3)  # doctest: +SKIP
    >>> render_record(sample, "data/synth", "record3.png")  # doctest: +SKIP
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from PIL import Image, ImageDraw, ImageFont

from minterpr.data.formats.gallery import iter_gallery
from minterpr.data.formats.minterpedes import iter_minterpedes
from minterpr.data.images import load_rgb
from minterpr.data.layout import gallery_file
from minterpr.data.paths import resolve_under
from minterpr.errors import InputError, MinterprError
from minterpr.types import RetrievalSample

Colour = tuple[int, int, int]
TARGET_COLOUR: Colour = (24, 150, 60)  # green: the person sought
REFERENCE_COLOUR: Colour = (210, 30, 30)  # red: a reference shown to the user, never the target
TEXT_COLOUR: Colour = (20, 20, 20)
SYSTEM_COLOUR: Colour = (40, 80, 170)  # the system's questions, set apart from the user's words
BACKGROUND: Colour = (255, 255, 255)


@dataclass(frozen=True)
class RenderConfig:
    """Sizes of the rendered record, in pixels."""

    width: int = 900  # canvas width; text wraps to what the images leave
    target_height: int = 256  # the target image is scaled to this height (aspect kept)
    reference_height: int = 192  # each reference image is scaled to this height
    font_size: int = 15  # body text; the captions under the images are 2 px larger
    margin: int = 12  # outer margin and the gap between an image and its text
    frame: int = 4  # width of the coloured frame around each image


class RecordIndexError(MinterprError, IndexError):
    """The index asked for is past the file's last record; ``count`` says how many there are."""

    def __init__(self, path: str, index: int, count: int) -> None:
        self.count = count
        valid = "it is empty" if count == 0 else f"valid indices are 0..{count - 1}"
        super().__init__(
            f"{path}: no record {index}: the file has {count:,} record{'s' if count != 1 else ''} ({valid})"
        )


def read_record(path: str | os.PathLike[str], index: int) -> tuple[RetrievalSample, int]:
    """Record ``index`` (0-based) of a MInterPEDES file and the file's record count.

    Streams the file (bounded memory) and counts every record so an index out of range can
    say how many there are. Raises :class:`RecordIndexError` for such an index and
    :class:`~minterpr.data.errors.DataError` for a malformed record.
    """
    if index < 0:
        raise RecordIndexError(str(path), index, sum(1 for _ in iter_minterpedes(path)))
    found: RetrievalSample | None = None
    count = 0
    for count, sample in enumerate(iter_minterpedes(path), start=1):
        if count - 1 == index:
            found = sample
    if found is None:
        raise RecordIndexError(str(path), index, count)
    return found, count


def gallery_identities(data_path: str | os.PathLike[str]) -> dict[str, str]:
    """Image path -> namespaced person id, from the gallery manifest beside a dialogue file.

    ``DIR/<split>.jsonl`` pairs with ``DIR/gallery_<split>.jsonl`` in minterpr's dataset layout;
    MInterPEDES stores integer ids only, the manifest the real identity. Empty when absent.
    """
    path = Path(data_path)
    manifest = path.with_name(gallery_file(path.stem))
    if not manifest.is_file():
        return {}
    return {image.path: image.person_id for image in iter_gallery(manifest)}


def load_font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    """Pillow's bundled font at ``size`` (needs FreeType, Pillow >= 10.1), else its fixed bitmap font."""
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, ImportError, OSError):  # old Pillow, or built without FreeType
        return ImageFont.load_default()


def wrap_text(text: str, font: ImageFont.ImageFont | ImageFont.FreeTypeFont, width: int) -> list[str]:
    """Greedy word wrap to ``width`` pixels; a word wider than the line is cut by characters."""
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split():
            candidate = f"{line} {word}" if line else word
            if font.getlength(candidate) <= width:
                line = candidate
                continue
            if line:
                lines.append(line)
            line = word
            while font.getlength(line) > width and len(line) > 1:  # e.g. a long path
                cut = len(line) - 1
                while cut > 1 and font.getlength(line[:cut]) > width:
                    cut -= 1
                lines.append(line[:cut])
                line = line[cut:]
        lines.append(line)
    return lines


@dataclass(frozen=True)
class _Span:
    """A run of wrapped text: its lines share one colour."""

    lines: tuple[str, ...]
    colour: Colour
    gap_before: int = 0  # extra pixels above, to separate turns


def _spans(entries: Sequence[tuple[str, Colour, int]], font, width: int) -> list[_Span]:
    return [_Span(tuple(wrap_text(text, font, width)), colour, gap) for text, colour, gap in entries]


class _Canvas:
    """Measures and draws framed images with captions and wrapped text blocks."""

    def __init__(self, config: RenderConfig) -> None:
        self.config = config
        self.font = load_font(config.font_size)
        self.bold = load_font(config.font_size + 2)
        self.line_height = self._line_height(self.font) + 3
        self.caption_height = self._line_height(self.bold) + 3

    @staticmethod
    def _line_height(font) -> int:
        left, top, right, bottom = font.getbbox("Ag|y")
        return int(bottom)

    def text_height(self, spans: Sequence[_Span]) -> int:
        return sum(s.gap_before + len(s.lines) * self.line_height for s in spans)

    def draw_text(self, draw: ImageDraw.ImageDraw, xy: tuple[int, int], spans: Sequence[_Span]) -> None:
        x, y = xy
        for span in spans:
            y += span.gap_before
            for line in span.lines:
                draw.text((x, y), line, fill=span.colour, font=self.font)
                y += self.line_height

    def framed(self, image: Image.Image, height: int, colour: Colour, caption: Sequence[str]) -> Image.Image:
        """The image scaled to ``height``, in a ``colour`` frame, with caption lines below."""
        f = self.config.frame
        scaled = image.convert("RGB").resize(
            (max(1, round(image.width * height / image.height)), height), Image.Resampling.BICUBIC
        )
        caption_width = max([scaled.width + 2 * f] + [int(self.bold.getlength(c)) + 2 for c in caption])
        tile = Image.new("RGB", (caption_width, height + 2 * f + len(caption) * self.caption_height + 4), BACKGROUND)
        x0 = (caption_width - scaled.width - 2 * f) // 2
        draw = ImageDraw.Draw(tile)
        draw.rectangle((x0, 0, x0 + scaled.width + 2 * f - 1, height + 2 * f - 1), fill=colour)
        tile.paste(scaled, (x0 + f, f))
        y = height + 2 * f + 2
        for line in caption:
            draw.text(((caption_width - self.bold.getlength(line)) / 2, y), line, fill=colour, font=self.bold)
            y += self.caption_height
        return tile


def _open(root: Path, rel: str, role: str, allow_outside_root: bool) -> Image.Image:
    try:
        path = resolve_under(root, rel, allow_outside=allow_outside_root)
    except InputError as exc:
        raise InputError(f"{role} image: {exc}") from None
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{role} image {rel!r} not found under {root} (pass --image-root?)")
    return load_rgb(path)


def render_record(
    sample: RetrievalSample,
    image_root: str | os.PathLike[str],
    out_png: str | os.PathLike[str],
    config: RenderConfig = RenderConfig(),
    *,
    identities: Mapping[str, str] | None = None,
    allow_outside_root: bool = False,
) -> Path:
    """Render ``sample`` into ``out_png``; image paths resolve under ``image_root``. Returns the path.

    ``identities`` (image path -> person id, e.g. :func:`gallery_identities`) names the target's
    and the references' real identities; without it the record's own id labels the target.
    Before anything is written, raises FileNotFoundError naming a missing image,
    :class:`~minterpr.errors.ImageError` for one that cannot be decoded and
    :class:`~minterpr.errors.InputError` for a path that leaves ``image_root`` (unless
    ``allow_outside_root``).
    """
    root, ids = Path(image_root), dict(identities or {})
    canvas, c = _Canvas(config), config
    dialogue = sample.dialogue
    target_id = ids.get(sample.target_path, sample.person_id)
    target = canvas.framed(
        _open(root, sample.target_path, "target", allow_outside_root),
        c.target_height,
        TARGET_COLOUR,
        ["TARGET", target_id],
    )
    references = []
    for turn, ref in enumerate(dialogue.reference_turns, start=len(dialogue.qa_turns) + 1):
        caption = [f"turn {turn}: not the target"]
        if ref.reference_path in ids:
            caption.append(ids[ref.reference_path])
        references.append(
            canvas.framed(
                _open(root, ref.reference_path, "reference", allow_outside_root),
                c.reference_height,
                REFERENCE_COLOUR,
                caption,
            )
        )

    # One image column for every row, so the text of every turn starts at the same x.
    column = max([target.width] + [tile.width for tile in references])
    text_width = max(120, c.width - 3 * c.margin - column)
    entries = [("Description (turn 0):", SYSTEM_COLOUR, 0), (dialogue.description, TEXT_COLOUR, 0)]
    for turn, qa in enumerate(dialogue.qa_turns, start=1):
        entries += [
            (f"Q{turn}: {qa.question}", SYSTEM_COLOUR, canvas.line_height // 2),
            (f"A{turn}: {qa.answer}", TEXT_COLOUR, 0),
        ]
    rows = [(target, _spans(entries, canvas.font, text_width))]
    for turn, (tile, ref) in enumerate(zip(references, dialogue.reference_turns), start=len(dialogue.qa_turns) + 1):
        rows.append(
            (
                tile,
                _spans(
                    [
                        (f"Turn {turn}: the system shows this image; the user replies:", SYSTEM_COLOUR, 0),
                        (ref.feedback, TEXT_COLOUR, 0),
                    ],
                    canvas.font,
                    text_width,
                ),
            )
        )

    heights = [max(tile.height, canvas.text_height(spans)) for tile, spans in rows]
    width = 3 * c.margin + column + text_width
    out = Image.new("RGB", (width, sum(heights) + c.margin * (len(rows) + 1)), BACKGROUND)
    draw = ImageDraw.Draw(out)
    y = c.margin
    for (tile, spans), height in zip(rows, heights):
        out.paste(tile, (c.margin + (column - tile.width) // 2, y))
        canvas.draw_text(draw, (2 * c.margin + column, y), spans)
        y += height + c.margin
        if y < out.height - 1:  # a rule between turns keeps each feedback next to its image
            draw.line((c.margin, y - c.margin // 2, width - c.margin, y - c.margin // 2), fill=(215, 215, 215))
    path = Path(out_png)
    path.parent.mkdir(parents=True, exist_ok=True)
    out.save(path)
    return path
