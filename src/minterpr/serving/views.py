"""What a session shows after a turn, as plain views: results (with similarity, camera, time and
the facts each matches or contradicts), the system's next move, the confirmed match, the timeline.

Positions: a session over a case's scope searches an index of the in-scope images only;
everything shown names images by their position in the whole stored gallery
(``gallery_index``). :class:`Positions` converts between the two.

Example:
    >>> import numpy as np
    >>> positions = Positions(np.array([3, 5, 9]), 10)
    >>> positions.to_gallery(1), positions.to_local(9), positions.to_local(4)
    (5, 2, None)
    >>> Positions(None, 10).to_local(4)
    4
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from minterpr.language.corrections import replaced_by
from minterpr.language.dialogue_acts import verdict
from minterpr.language.ontology import ONTOLOGY
from minterpr.interaction.history import describe_said, fact_source
from minterpr.interaction.explain import describe_fact
from minterpr.interaction.match import percent
from minterpr.interaction.presence import ABSENT_BELOW, presence_probability, session_features
from minterpr.serving.galleries import TIME_KEY, LoadedGallery, format_time
from minterpr.serving.times import when
from minterpr.serving.schemas.search import ActionView, ConfirmedView, ResultView, TimelineEntry, TurnView

STATEMENT = (
    "This records the analyst's judgement that the image looks like the person searched for "
    "(match {similarity} when it was confirmed). It is not an identification: the system compares "
    "appearance, and different people can look alike."
)


@dataclass(frozen=True)
class Positions:
    """Local positions (in the session's index) <-> gallery positions (in the stored gallery)."""

    rows: np.ndarray | None  # sorted gallery positions of the session's index; None = the whole gallery
    gallery_size: int

    def to_gallery(self, local: int) -> int:
        return int(local) if self.rows is None else int(self.rows[local])

    def to_local(self, gallery_index: int) -> int | None:
        """The local position of a gallery image; None when it is outside the session's scope."""
        if not 0 <= gallery_index < self.gallery_size:
            return None
        if self.rows is None:
            return int(gallery_index)
        k = int(np.searchsorted(self.rows, gallery_index))
        return k if k < len(self.rows) and int(self.rows[k]) == gallery_index else None

    @property
    def in_scope(self) -> int:
        return self.gallery_size if self.rows is None else len(self.rows)


@dataclass
class Live:
    """A stored session computed in memory: the Session, its scope and what it committed."""

    session_id: str
    case_id: int
    user_id: int
    gallery: LoadedGallery
    positions: Positions
    session: Any  # minterpr.interaction.session.Session over the scope's index
    options: dict[str, Any]  # the recorded Session options
    seq: int  # events committed (the session's events up to here are in this state)
    timeline: list[TimelineEntry] = field(default_factory=list)  # one per turn of session.history
    exports: list[TimelineEntry] = field(default_factory=list)  # one per export made (kind "export"), oldest first
    scope: str = "every camera, any time"  # the images this session searches, in words (scope_words)

    def image_info(self, gallery_index: int) -> tuple[str, str | None, str | None]:
        """(path, camera, time) of a gallery image."""
        image = self.gallery.index.images[gallery_index]
        return image.path, image.camera_id, format_time(float(self.gallery.times[gallery_index]))


def _score(value: float) -> float:
    return round(float(value), 6) if math.isfinite(value) else 0.0


def results(live: Live, top: int) -> list[ResultView]:
    """The top results; ``similarity`` is each one's match probability (``step.match()``, at the model's
    fitted temperature: :mod:`minterpr.interaction.match`)."""
    step = live.session.step
    if step is None:
        return []
    judgements = live.session.judgements
    shares = step.match()
    tracked = _confirmed_tracks(live)
    out = []
    for rank, local in enumerate(step.ranking[:top].tolist()):
        explanation = step.explain(rank)
        gallery_index = live.positions.to_gallery(local)
        path, camera, time = live.image_info(gallery_index)
        out.append(
            ResultView(
                rank=rank + 1,
                gallery_index=gallery_index,
                path=path,
                camera=camera,
                time=time,
                similarity=_score(shares[rank]),
                matches=[describe_fact(f) for f in explanation.matched],
                contradicts=[describe_fact(f) for f in explanation.contradicted],
                unsure=[describe_fact(f) for f in explanation.unsure],
                judgement=judgements.get(local),
                same_track_as=None if judgements.get(local) else tracked.get(_track(live, gallery_index)),
                linked_tracks=_linked(live, gallery_index),
            )
        )
    return out


def _linked(live: Live, gallery_index: int) -> int:
    """How many other tracks ingestion linked to the image's track (0 without a link group)."""
    from minterpr.serving.follow import linked_tracks

    link = live.gallery.metadata[gallery_index].get("link")
    return 0 if link is None else max(0, len(linked_tracks(live.gallery).get(link, [])) - 1)


def _track(live: Live, gallery_index: int) -> tuple[Any, Any] | None:
    """(source, track) of an ingested crop; None for a crop without a track."""
    meta = live.gallery.metadata[gallery_index]
    return None if meta.get("track") is None else (meta.get("source"), meta.get("track"))


def _confirmed_tracks(live: Live) -> dict[tuple[Any, Any], int]:
    """(source, track) -> the first confirmed crop on it (gallery position)."""
    out: dict[tuple[Any, Any], int] = {}
    for local, said in live.session.judgements.items():
        if said:
            gallery_index = live.positions.to_gallery(local)
            key = _track(live, gallery_index)
            if key is not None:
                out.setdefault(key, gallery_index)
    return out


def seen(live: Live, gallery_index: int) -> dict[str, Any]:
    """Rank (1-based, None beyond a shortlist) and match probability of an image as the page shows it
    now: recorded with a judgement, so the confirmation and the export report what the analyst saw."""
    step = live.session.step
    local = live.positions.to_local(gallery_index)
    rank = None if step is None or local is None else step.rank_of(local)
    if rank is None:
        return {"seen_rank": None, "seen_similarity": None}
    return {"seen_rank": rank + 1, "seen_similarity": _score(step.match()[rank])}


def action(live: Live) -> ActionView | None:
    from minterpr.interaction.steps import AskQuestion, ShowReferences

    move = live.session.action
    if isinstance(move, AskQuestion):
        choices = [v.replace("_", " ") for v in ONTOLOGY.slot(move.slot).value_names]
        return ActionView(kind="question", text=move.text, slot=move.slot, choices=choices)
    if isinstance(move, ShowReferences):
        return ActionView(
            kind="references", text=move.text, gallery_indices=[live.positions.to_gallery(i) for i in move.indices]
        )
    return None


def confirmed(live: Live) -> ConfirmedView | None:
    """The image the analyst confirmed (the last one judged "this is the person"), if any."""
    every = confirmed_all(live)
    return every[-1] if every else None


def confirmed_all(live: Live) -> list[ConfirmedView]:
    """Every image the analyst confirmed as the person (several crops of one person, across cameras),
    in the order confirmed."""
    chosen = [local for local, verdict in live.session.judgements.items() if verdict]
    order = {t.gallery_index: k for k, t in enumerate(live.timeline) if t.kind == "confirm"}
    views = [_confirmed_view(live, live.positions.to_gallery(local)) for local in chosen]
    return sorted(views, key=lambda c: order.get(c.gallery_index, -1))


def _confirmed_view(live: Live, gallery_index: int) -> ConfirmedView:
    path, camera, time = live.image_info(gallery_index)
    # what the page showed when the analyst confirmed it (recorded with the confirmation)
    entry = next((t for t in reversed(live.timeline) if t.kind == "confirm" and t.gallery_index == gallery_index), None)
    rank, similarity = (entry.rank, entry.similarity) if entry is not None else (None, None)
    return ConfirmedView(
        gallery_index=gallery_index,
        path=path,
        camera=camera,
        time=time,
        similarity=similarity,
        rank=rank,
        statement=STATEMENT.format(similarity=percent(similarity)),
        follow_of=None if entry is None else entry.follow_of,
        same_person=None if entry is None else entry.same_person,
    )


def unrecognised(live: Live) -> list[str]:
    """The facts said so far on labels the run's model cannot recognise (its evidence policy)."""
    policy = live.session.evidence
    if policy is None:
        return []
    return [describe_fact(f) for f in dict.fromkeys(live.session.facts) if not policy.recognised(f)]


def timeline(live: Live) -> list[TimelineEntry]:
    """The conversation, each turn with the facts the session now holds for it (withdrawn ones gone), which
    of them a later correction replaced, and how a feedback turn judged its image."""
    history = live.session.history
    where = [[k, m] for k, entry in enumerate(history) for m in range(len(entry.facts))]
    later = replaced_by([f for entry in history for f in entry.facts])
    by_turn: dict[int, list[list[int] | None]] = {}
    for (k, _), j in zip(where, later):
        by_turn.setdefault(k, []).append(None if j is None else where[j])
    return [
        t.model_copy(
            update={
                "facts": [describe_said(f) for f in entry.facts],
                "fact_sources": [fact_source(f) for f in entry.facts],
                "replaced_by": by_turn.get(k, []),
                "judgement": verdict(t.text) if t.kind == "feedback" else None,
            }
        )
        for k, (t, entry) in enumerate(zip(live.timeline, history))
    ]


def scope_words(cameras: Any, start: float | None, end: float | None) -> str:
    """A session's scope for people: ``'cam1, cam2, 2026-12-01 10:00:00 – any time (UTC)'``;
    ``'every camera, any time'`` when it is the whole gallery.

    Example:
        >>> scope_words(None, None, None), scope_words(["c1", "c2"], 0.0, None)
        ('every camera, any time', 'c1, c2, 1970-01-01 00:00:00 – any time (UTC)')
    """
    words = ", ".join(cameras) if cameras else "every camera"
    if start is None and end is None:
        return words + ", any time"
    return f"{words}, {when(format_time(start)) or 'any time'} – {when(format_time(end)) or 'any time'} (UTC)"


def presence(live: Live) -> tuple[float | None, bool]:
    """(P(the person is in the searched images), whether to say "probably not in this footage").

    With the run's fitted presence model (extra ``"presence_model"``, interaction/presence.py)
    the probability of every step, from the facts, the match and the images ruled out (each with the
    match it had on the page when it was), flagged under the model's threshold; without one (or over
    a gallery without attribute probabilities) the rulings-out estimate (None before anything was
    ruled out) under ABSENT_BELOW. Never flagged once
    the analyst confirmed an image."""
    judgements = live.session.judgements
    masses = [
        t.similarity
        for t in live.timeline
        if t.kind == "feedback"
        and t.similarity is not None
        and t.gallery_index is not None
        and judgements.get(live.positions.to_local(t.gallery_index)) is False
    ]
    model = getattr(live.gallery.pipeline.extras, "presence", None)
    usable = model is not None and live.session.index.attribute_probs is not None  # its fit signals need them
    features = session_features(live.session, masses) if usable else None
    if features is not None:
        probability, threshold = model.probability(features), model.threshold
    else:
        probability, threshold = (presence_probability(masses) if masses else None), ABSENT_BELOW
    flagged = probability is not None and probability < threshold and not any(judgements.values())
    return probability, flagged


def turn_view(live: Live, top: int, gallery_name: str) -> TurnView:
    probability, absent = presence(live)
    return TurnView(
        session_id=live.session_id,
        case_id=live.case_id,
        gallery=gallery_name,
        seq=live.seq,
        turns=len(live.session.history),
        gallery_size=live.positions.gallery_size,
        in_scope=live.positions.in_scope,
        results=results(live, top),
        action=action(live),
        confirmed=confirmed(live),
        confirmed_all=confirmed_all(live),
        timeline=timeline(live),
        unrecognised=unrecognised(live),
        presence=probability,
        probably_absent=absent,
        scope=live.scope,
        exports=list(live.exports),
        model_notice=live.session.vlm.notice if live.session.vlm is not None else "",
    )


def export_images(live: Live, gallery_index: int, *, files: bool = False) -> list[dict[str, Any]]:
    """The confirmed crop and the other in-scope crops of its track (same source and track metadata), their
    paths relative to the gallery; ``files``: each with its ``absolute_path`` on the server too (for the
    zip the server builds itself, never for a response: an analyst has no business with the server's folders)."""
    gallery = live.gallery
    meta = gallery.metadata[gallery_index]
    chosen = [gallery_index]
    track, source = meta.get("track"), meta.get("source")
    if track is not None:
        chosen += [
            i
            for i, m in enumerate(gallery.metadata)
            if i != gallery_index
            and m.get("track") == track
            and m.get("source") == source
            and live.positions.to_local(i) is not None
        ]
    out = []
    for i in chosen:
        path, camera, time = live.image_info(i)
        root = gallery.index.root
        out.append(
            {
                "gallery_index": i,
                "path": path,
                "camera": camera,
                "time": time if time is not None else gallery.metadata[i].get(TIME_KEY),
                "metadata": dict(gallery.metadata[i]),
            }
        )
        if files:
            out[-1]["absolute_path"] = path if root is None else os.path.join(root, path)
    return out
