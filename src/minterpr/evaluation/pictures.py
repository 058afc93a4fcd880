"""Pictures of what the model returns: a ranked-results strip per query, one row per round.

Like torchreid's ``visrank`` and fast-reid's visualiser, for a conversation: each row is one
round, with the turn it added (the query text, wrapped, on the left) and the top-k gallery images
with their rank and score. The target image has a green frame, other images of the target's
identity a light green one; an image the user rejected so far carries a red cross, one they
confirmed a green tick, one they were unsure of a ``?``; the image a round's turn judged (a
shown reference) is drawn at the end of its text, marked the same way. The text column ends with
the target's rank in that round. Pillow only (its default font); the PNG is written atomically.

What to draw comes from what an evaluation already computes, through the small recorders of
:mod:`minterpr.evaluation.picture_recorders`, which read it and never change it.

Example:
    >>> import os, tempfile
    >>> from PIL import Image
    >>> from minterpr.types import GalleryImage
    >>> root = tempfile.mkdtemp()
    >>> for k in range(3):
    ...     Image.new("RGB", (32, 64), (80 * k, 90, 200)).save(os.path.join(root, f"{k}.png"))
    >>> images = [GalleryImage(f"{k}.png", f"x:{k // 2}") for k in range(3)]
    >>> rows = [RoundView("a woman in blue", (2, 0, 1), (0.9, 0.5, 0.1)),
    ...         RoundView("Q: Bag? A: no", (0, 1, 2), (0.8, 0.7, 0.2), judgements={2: False})]
    >>> path = write_ranked_strip(os.path.join(root, "strip.png"), rows, images, root=root, target=0,
    ...                           config=StripConfig(top_k=3))
    >>> Image.open(path).size == strip_size(2, StripConfig(top_k=3))
    True
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from PIL import Image, ImageDraw

from minterpr.data.images import load_rgb
from minterpr.data.paths import resolve_under
from minterpr.data.render_record import load_font, wrap_text
from minterpr.errors import InputError
from minterpr.fileio import atomic_write
from minterpr.types import GalleryImage

log = logging.getLogger(__name__)

Colour = tuple[int, int, int]
TARGET_COLOUR: Colour = (24, 150, 60)  # green frame: the image sought
SAME_IDENTITY_COLOUR: Colour = (150, 215, 160)  # light green frame: another image of the target's identity
REJECTED_COLOUR: Colour = (215, 25, 25)  # red cross: the user said it is not the person
CONFIRMED_COLOUR: Colour = (24, 150, 60)  # green tick: the user said it is the person
UNSURE_COLOUR: Colour = (230, 140, 0)  # "?": the user could not tell
PLAIN_COLOUR: Colour = (200, 200, 200)  # thin frame of any other image
TEXT_COLOUR: Colour = (20, 20, 20)
ROUND_COLOUR: Colour = (40, 80, 170)
BACKGROUND: Colour = (255, 255, 255)
TILE_BACKGROUND: Colour = (238, 238, 238)


@dataclass(frozen=True)
class StripConfig:
    """Sizes of a ranked strip, in pixels."""

    top_k: int = 8  # images per row (the columns)
    tile_width: int = 64  # each image is fitted into tile_width x tile_height, aspect kept
    tile_height: int = 128
    text_width: int = 260  # the query text column on the left
    font_size: int = 12
    margin: int = 8  # outer margin, and the gap between columns and between rows
    frame: int = 4  # frame width around every image (drawn in the colour that says what it is)

    def __post_init__(self) -> None:
        for name in ("top_k", "tile_width", "tile_height", "text_width", "font_size", "frame"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise InputError(f"StripConfig.{name} must be an int >= 1, got {getattr(self, name)!r}")
        if self.text_width < self.tile_width + 2 * self.frame + self.margin + 40:
            raise InputError(
                f"StripConfig.text_width ({self.text_width}) must leave room for a judged image "
                f"beside the text: at least tile_width + 2 * frame + margin + 40"
            )


@dataclass(frozen=True)
class RoundView:
    """One row: what the round added and the ranking after it."""

    text: str  # the turn this round added (the query text); "" when nothing was said
    ranking: Sequence[int]  # gallery indices, best first (the first top_k are drawn)
    scores: Sequence[float] | None = None  # scores in ranking order; None: ranks only
    judgements: Mapping[int, bool | None] = field(default_factory=dict)  # gallery index -> the user's verdict so far
    target_rank: int | None = None  # 0-based rank of the target; None: found in ``ranking`` or unknown
    shown: int | None = None  # gallery index of the image this turn judged (a shown reference), drawn by its text


class _Layout:
    """Where everything goes; the picture's size depends only on the rows and the config."""

    def __init__(self, config: StripConfig) -> None:
        self.config = config
        self.font = load_font(config.font_size)
        self.line_height = int(self.font.getbbox("Ag|y")[3]) + 3
        self.cell_width = config.tile_width + 2 * config.frame
        self.row_height = config.tile_height + 2 * config.frame + self.line_height  # image + caption
        self.top = 2 * config.margin + self.line_height  # below the title line

    def size(self, rows: int) -> tuple[int, int]:
        c = self.config
        return (
            2 * c.margin + c.text_width + c.top_k * (c.margin + self.cell_width),
            self.top + rows * (self.row_height + c.margin),
        )

    def shown_cell(self, row: int) -> tuple[int, int, int, int]:
        """(x0, y0, x1, y1) of the image a row's turn judged: the right end of the text column."""
        x1 = self.config.margin + self.config.text_width - 1
        _, y0, _, y1 = self.cell(row, 0)
        return x1 - self.cell_width + 1, y0, x1, y1

    def cell(self, row: int, rank: int) -> tuple[int, int, int, int]:
        """(x0, y0, x1, y1) of the framed image at (row, 0-based rank), inclusive."""
        c = self.config
        x0 = 2 * c.margin + c.text_width + rank * (c.margin + self.cell_width)
        y0 = self.top + row * (self.row_height + c.margin)
        return x0, y0, x0 + self.cell_width - 1, y0 + c.tile_height + 2 * c.frame - 1


def strip_size(rounds: int, config: StripConfig = StripConfig()) -> tuple[int, int]:
    """(width, height) of a strip of ``rounds`` rows."""
    return _Layout(config).size(rounds)


def tile_box(row: int, rank: int | None, config: StripConfig = StripConfig()) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1), inclusive, of the framed image at ``row`` and 0-based ``rank`` (None: the
    image the row's turn judged, beside its text): the outer ``config.frame`` pixels are the frame."""
    layout = _Layout(config)
    return layout.shown_cell(row) if rank is None else layout.cell(row, rank)


def _rank_of(ranking: Sequence[int], gallery_index: int | None) -> int | None:
    if gallery_index is None:
        return None
    found = np.flatnonzero(np.asarray(ranking) == gallery_index)
    return int(found[0]) if len(found) else None


class _Images:
    """Gallery images fitted into tiles, each read once; an unreadable one becomes a grey tile."""

    def __init__(
        self, images: Sequence[GalleryImage], root: str | None, config: StripConfig, allow_outside_root: bool
    ) -> None:
        self.images, self.root, self.config, self.allow = images, root, config, allow_outside_root
        self.cache: dict[int, Image.Image] = {}
        self.unreadable: list[str] = []

    def tile(self, i: int) -> Image.Image:
        if i not in self.cache:
            c = self.config
            tile = Image.new("RGB", (c.tile_width, c.tile_height), TILE_BACKGROUND)
            try:
                picture = load_rgb(resolve_under(self.root, self.images[i].path, allow_outside=self.allow))
            except (OSError, InputError) as err:
                self.unreadable.append(f"{self.images[i].path} ({err})")
                ImageDraw.Draw(tile).text((4, 4), "?", fill=(120, 120, 120))
            else:
                scale = min(c.tile_width / picture.width, c.tile_height / picture.height)
                size = (max(1, round(picture.width * scale)), max(1, round(picture.height * scale)))
                fitted = picture.resize(size, Image.Resampling.BICUBIC)
                tile.paste(fitted, ((c.tile_width - size[0]) // 2, (c.tile_height - size[1]) // 2))
            self.cache[i] = tile
        return self.cache[i]


def _mark(draw: ImageDraw.ImageDraw, box: tuple[int, int, int, int], verdict: bool | None, width: int) -> None:
    x0, y0, x1, y1 = box
    if verdict is False:  # a red cross over the whole image
        draw.line((x0, y0, x1, y1), fill=REJECTED_COLOUR, width=width)
        draw.line((x0, y1, x1, y0), fill=REJECTED_COLOUR, width=width)
    elif verdict is True:  # a tick in the top-left corner
        draw.line((x0 + 4, y0 + 12, x0 + 9, y0 + 18, x0 + 20, y0 + 4), fill=CONFIRMED_COLOUR, width=width)
    else:
        draw.rectangle((x0 + 2, y0 + 2, x0 + 14, y0 + 16), fill=UNSURE_COLOUR)
        draw.text((x0 + 5, y0 + 3), "?", fill=BACKGROUND)


def _legend(draw: ImageDraw.ImageDraw, layout: _Layout, width: int, has_target: bool, title: str) -> None:
    """The key, right-aligned on the title line (left out where the title leaves no room)."""
    entries = [("target", TARGET_COLOUR), ("same identity", SAME_IDENTITY_COLOUR)] if has_target else []
    entries += [("X rejected", REJECTED_COLOUR), ("tick confirmed", CONFIRMED_COLOUR), ("? unsure", UNSURE_COLOUR)]
    font, size, margin = layout.font, layout.line_height - 5, layout.config.margin
    x = width - margin - sum(size + 4 + int(font.getlength(text)) + 10 for text, _ in entries)
    if x < 2 * margin + font.getlength(title):
        return
    for text, colour in entries:
        draw.rectangle((x, margin + 2, x + size, margin + 2 + size), fill=colour)
        draw.text((x + size + 4, margin), text, fill=TEXT_COLOUR, font=font)
        x += size + 4 + int(font.getlength(text)) + 10


def _text_lines(
    layout: _Layout, round_number: int, view: RoundView, target_rank: int | None, has_target: bool
) -> list[tuple[str, Colour]]:
    """The row's text column: the round, the query text wrapped (cut to fit), the target's rank."""
    font, width = layout.font, layout.config.text_width
    if view.shown is not None:  # the judged image takes the column's right end
        width = max(40, width - layout.cell_width - layout.config.margin)
    capacity = max(2, layout.row_height // layout.line_height)
    last = ""
    if has_target:
        last = f"target: rank {target_rank + 1}" if target_rank is not None else "target: not in the ranking shown"
    body = wrap_text(view.text or "(nothing said: the ranking stays)", font, width)
    room = capacity - 1 - (1 if last else 0)
    if len(body) > room:
        body = body[:room]
        cut = body[-1]
        while cut and font.getlength(cut + " ...") > width:
            cut = cut[:-1]
        body[-1] = cut.rstrip() + " ..."
    lines = [(f"round {round_number}", ROUND_COLOUR)] + [(line, TEXT_COLOUR) for line in body]
    return lines + ([(last, TARGET_COLOUR if target_rank == 0 else TEXT_COLOUR)] if last else [])


def write_ranked_strip(
    path: str | os.PathLike[str],
    rounds: Sequence[RoundView],
    images: Sequence[GalleryImage],
    *,
    root: str | os.PathLike[str] | None = None,
    target: int | None = None,
    target_person: str | None = None,
    title: str = "",
    config: StripConfig = StripConfig(),
    allow_outside_root: bool = False,
) -> Path:
    """Draw one row per round (see the module doc) and write the PNG to ``path`` atomically.

    ``images``: the gallery (the rankings' indices point into it), paths relative to ``root``;
    ``target``: the gallery index of the image sought (None: no target, e.g. a live chat);
    ``target_person``: its identity, whose other images get the light frame (default: the
    target's ``person_id``). An image that cannot be read is drawn as a grey tile (logged).
    """
    if not rounds:
        raise InputError("write_ranked_strip: no rounds to draw")
    if target is not None and not 0 <= target < len(images):
        raise InputError(f"write_ranked_strip: target {target} is not a gallery index (0..{len(images) - 1})")
    c, layout = config, _Layout(config)
    person = target_person if target_person is not None or target is None else images[target].person_id
    tiles = _Images(images, None if root is None else os.fspath(root), config, allow_outside_root)
    canvas = Image.new("RGB", layout.size(len(rounds)), BACKGROUND)
    draw = ImageDraw.Draw(canvas)
    draw.text((c.margin, c.margin), title, fill=TEXT_COLOUR, font=layout.font)
    _legend(draw, layout, canvas.width, target is not None, title)
    for row, view in enumerate(rounds):
        target_rank = view.target_rank if view.target_rank is not None else _rank_of(view.ranking, target)
        y = layout.cell(row, 0)[1]
        for k, (line, colour) in enumerate(_text_lines(layout, row, view, target_rank, target is not None)):
            draw.text((c.margin, y + k * layout.line_height), line, fill=colour, font=layout.font)
        cells = [
            (
                layout.cell(row, rank),
                int(i),
                f"#{rank + 1}" + ("" if view.scores is None else f" {float(view.scores[rank]):.3f}"),
            )
            for rank, i in enumerate(list(view.ranking)[: c.top_k])
        ]
        if view.shown is not None and 0 <= view.shown < len(images):
            cells.append((layout.shown_cell(row), int(view.shown), "shown"))
        for (x0, y0, x1, y1), i, caption in cells:
            if i == target:
                colour, width = TARGET_COLOUR, c.frame
            elif person is not None and images[i].person_id == person:
                colour, width = SAME_IDENTITY_COLOUR, c.frame
            else:
                colour, width = PLAIN_COLOUR, 1
            draw.rectangle(
                (x0, y0, x1, y1), fill=colour if width == c.frame else BACKGROUND, outline=colour, width=width
            )
            canvas.paste(tiles.tile(i), (x0 + c.frame, y0 + c.frame))
            if i in view.judgements:
                _mark(
                    draw,
                    (x0 + c.frame, y0 + c.frame, x1 - c.frame, y1 - c.frame),
                    view.judgements[i],
                    max(2, c.frame - 1),
                )
            draw.text((x0, y1 + 2), caption, fill=TEXT_COLOUR, font=layout.font)
    if tiles.unreadable:
        log.warning(
            "%s: %d image(s) drawn grey (unreadable), e.g. %s", path, len(tiles.unreadable), tiles.unreadable[0]
        )
    return atomic_write(path, lambda f: canvas.save(f, format="PNG"))
