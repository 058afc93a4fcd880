"""Looking closely at results: the per-camera timeline strip of the ranked results, the footage's time
range, and what the "look closely" page of one image shows (its full-resolution crop, the frame it
was cut from with its box drawn, where it came from, and a crop to compare it with).

The strip is server-drawn SVG (attributes, no inline style: a content security policy may forbid
styles and scripts in the markup); each mark links to its result card.

Example:
    >>> from types import SimpleNamespace as R
    >>> rows = [R(rank=1, gallery_index=4, camera="a", time="2026-03-02T08:00:00+00:00"),
    ...         R(rank=2, gallery_index=7, camera="b", time="2026-03-02T09:00:00+00:00"),
    ...         R(rank=3, gallery_index=9, camera="a", time=None)]
    >>> strip = timeline_strip(rows)
    >>> [(lane.camera, [(m.gallery_index, m.x) for m in lane.marks]) for lane in strip.lanes]
    [('a', [(4, 0.0)]), ('b', [(7, 1.0)])]
    >>> strip.untimed, strip.start, strip.end
    (1, '2026-03-02 08:00:00', '2026-03-02 09:00:00')
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Sequence

STRIP_WIDTH = 600  # SVG user units of the strip's time axis
LANE_HEIGHT = 30  # SVG user units of a camera lane with one row of rank labels
LABEL_WIDTH = 150  # room left of the axis for the camera names
TOP_MARGIN = 22  # from a lane's top to its axis: room for one row of rank labels above the marks
ROW_HEIGHT = 13  # each further row of rank labels (10-unit text, its box about 12 high), stacked above
MAX_ROWS = 3  # rows of rank labels per lane; a mark beyond them keeps its link and name, unlabelled
DIGIT_WIDTH = 6.5  # SVG units per digit of a 10-unit rank label (generous: labels never touch)


@dataclass(frozen=True)
class Mark:
    """One result on the strip."""

    gallery_index: int
    rank: int
    x: float  # position on the time axis in [0, 1]
    label: str  # "#3, camera, time" (the mark's accessible name)
    row: int = 0  # the row of its rank label above the axis (0 = nearest); -1 = no room: not labelled


@dataclass(frozen=True)
class Lane:
    camera: str
    marks: tuple[Mark, ...]

    @property
    def rows(self) -> int:
        return 1 + max((m.row for m in self.marks), default=0)


@dataclass(frozen=True)
class Strip:
    """Results by camera along time (those without a time are counted, not drawn)."""

    lanes: tuple[Lane, ...]
    start: str  # the earliest time drawn ("" when none)
    end: str  # the latest
    untimed: int  # results without a known time

    @property
    def height(self) -> int:
        return sum(_lane_height(lane) for lane in self.lanes)

    def px(self, mark: Mark) -> float:
        """The mark's SVG x."""
        return _x(mark.x)

    def py(self, lane_number: int) -> int:
        """The SVG y of a camera's lane axis (room above it for its rows of rank labels)."""
        above = sum(_lane_height(lane) for lane in self.lanes[:lane_number])
        return above + TOP_MARGIN + ROW_HEIGHT * (self.lanes[lane_number].rows - 1)

    def label_y(self, lane_number: int, mark: Mark) -> int:
        """The SVG baseline of a mark's rank label: its row above the lane's axis."""
        return self.py(lane_number) - 8 - ROW_HEIGHT * mark.row

    @property
    def width(self) -> int:
        return LABEL_WIDTH + STRIP_WIDTH + 10


def _x(x: float) -> float:
    return round(LABEL_WIDTH + x * STRIP_WIDTH, 1)


def _lane_height(lane: Lane) -> int:
    return LANE_HEIGHT + ROW_HEIGHT * (lane.rows - 1)


def _label_rows(marks: list[Mark]) -> list[Mark]:
    """Each mark with the lowest row where its rank label clears the labels already placed (left to
    right), at most MAX_ROWS rows; a mark left without room gets row -1 (drawn, linked, named, unlabelled)."""
    ends: list[float] = []  # per row: the right end of its last label
    out = []
    for mark in sorted(marks, key=lambda m: (m.x, m.rank)):
        half = DIGIT_WIDTH * len(str(mark.rank)) / 2 + 1
        left = _x(mark.x) - half
        row = next((k for k, end in enumerate(ends) if end <= left), len(ends) if len(ends) < MAX_ROWS else -1)
        if row == len(ends):
            ends.append(0.0)
        if row >= 0:
            ends[row] = _x(mark.x) + half
        out.append(Mark(mark.gallery_index, mark.rank, mark.x, mark.label, row))
    return sorted(out, key=lambda m: m.rank or 0)


def _moment(value: Any) -> dt.datetime | None:
    from minterpr.serving.times import as_datetime

    return as_datetime(value)


def timeline_strip(results: Sequence[Any]) -> Strip:
    """The strip of ``results`` (ResultViews: rank, gallery_index, camera, time)."""
    from minterpr.serving.times import when

    timed = [(r, _moment(r.time)) for r in results]
    known = [m for _, m in timed if m is not None]
    if not known:
        return Strip((), "", "", len(results))
    low, high = min(known), max(known)
    span = (high - low).total_seconds()
    lanes: dict[str, list[Mark]] = {}
    for r, moment in timed:
        if moment is None:
            continue
        x = 0.5 if span == 0 else (moment - low).total_seconds() / span
        camera = r.camera or "camera unknown"
        lanes.setdefault(camera, []).append(
            Mark(r.gallery_index, r.rank, round(x, 4), f"#{r.rank}, {camera}, {when(r.time)}")
        )
    return Strip(
        tuple(Lane(c, tuple(_label_rows(m))) for c, m in sorted(lanes.items())),
        when(low),
        when(high),
        len(results) - len(known),
    )


def footage_range(galleries: Sequence[Any], name: str) -> tuple[str, str] | None:
    """(earliest, latest) image time of the named gallery as the page writes times; None when unknown."""
    from minterpr.serving.times import when

    for g in galleries:
        if g.name == name and g.time_start is not None:
            return when(g.time_start), when(g.time_end)
    return None


def provenance(metadata: dict[str, Any]) -> list[tuple[str, str]]:
    """Where a crop came from, for people: the video frame, its box, the offset, the track."""
    rows = []
    if "frame" in metadata:
        rows.append(("Frame", str(metadata["frame"])))
    if "offset_s" in metadata:
        rows.append(("Offset in the video", f"{float(metadata['offset_s']):.1f} s"))
    if isinstance(metadata.get("box"), (list, tuple)) and len(metadata["box"]) == 4:
        x0, y0, x1, y1 = (round(float(v)) for v in metadata["box"])
        rows.append(("Box in the frame", f"x {x0}–{x1}, y {y0}–{y1} (pixels)"))
    if "track" in metadata:
        rows.append(("Track", str(metadata["track"])))
    if "source" in metadata:
        rows.append(("Source", str(metadata["source"]).rsplit("/", 1)[-1]))
    return rows


BOX_COLOUR, BOX_WIDTH = (255, 196, 0), 3  # the crop's box drawn on its frame: amber, 3 px at the stored size


def frame_with_box(path: Any, box: Sequence[float], frame_size: Sequence[int]) -> bytes:
    """A JPEG of the stored frame at ``path`` with ``box`` (x1, y1, x2, y2 in the source frame's
    pixels, ``frame_size`` = its [width, height]) drawn on it, scaled to the stored frame's size.
    The stored file stays clean: one frame serves every crop cut from it, each with its own box.

    Example:
        >>> import io, tempfile
        >>> from PIL import Image
        >>> path = tempfile.mkdtemp() + "/f.jpg"; Image.new("RGB", (100, 50), "white").save(path)
        >>> drawn = Image.open(io.BytesIO(frame_with_box(path, [40, 20, 80, 60], [200, 100])))
        >>> drawn.size, drawn.getpixel((20, 15))[2] < 100, drawn.getpixel((30, 20))[2] > 200  # box at half scale
        ((100, 50), True, True)
    """
    import io

    from PIL import ImageDraw

    from minterpr.serving.uploads import load_rgb

    image = load_rgb(path)
    sx, sy = image.width / float(frame_size[0]), image.height / float(frame_size[1])
    x1, y1, x2, y2 = (float(v) for v in box)
    ImageDraw.Draw(image).rectangle([x1 * sx, y1 * sy, x2 * sx, y2 * sy], outline=BOX_COLOUR, width=BOX_WIDTH)
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=88)
    return buffer.getvalue()


def has_frame(metadata: dict[str, Any]) -> bool:
    """Whether ingestion stored the frame a crop was cut from (with its box and the frame's size)."""
    box, size = metadata.get("box"), metadata.get("frame_size")
    return (
        isinstance(metadata.get("frame_image"), str)
        and isinstance(box, (list, tuple))
        and len(box) == 4
        and isinstance(size, (list, tuple))
        and len(size) == 2
        and all(float(v) > 0 for v in size)
    )


def look_context(pages: Any, user: Any, sid: str, gallery_index: int, compare: int | None) -> dict[str, Any]:
    """The look-closely page: the image (rank, match, camera, time, where it came from) and the one to
    compare it with: ``compare``, else the confirmed crop, else the top result that is not it."""
    search = pages.services.search
    view = search.view(user, sid, top=pages.settings.max_results)
    search.image_info(user, sid, gallery_index)  # 404 / 422 for an image the session may not show
    by_index = {r.gallery_index: r for r in view.results}
    if compare is None:
        confirmed = [c.gallery_index for c in view.confirmed_all if c.gallery_index != gallery_index]
        others = confirmed or [r.gallery_index for r in view.results if r.gallery_index != gallery_index][:1]
        compare = others[0] if others else None

    def described(i: int) -> dict[str, Any]:
        info = search.image_info(user, sid, i)
        return {
            "gallery_index": i,
            "result": by_index.get(i),
            "camera": info["camera"],
            "time": info["time"],
            "provenance": provenance(info["metadata"]),
            "frame": has_frame(info["metadata"]),
            "confirmed": any(c.gallery_index == i for c in view.confirmed_all),
        }

    return dict(
        view=view,
        image=described(gallery_index),
        other=None if compare is None else described(compare),
        can_search=pages.allowed(user, "session:search"),
        case=pages.services.cases.get_case(view.case_id),
    )
