"""Follow this person in a session: the crops that may show the person of a confirmed crop, per camera.

:func:`follow_view` is what ``GET /api/sessions/{id}/follow/{gallery_index}`` and the page's
"Follow this person" panel show (:func:`minterpr.interaction.follow.follow` over the session's
in-scope crops, the confirmed crop's own track left out, as the export carries it already, and the
tracks seen at the same time in its video, which show other people: :func:`~minterpr.ingest.links.seen_at_once`);
:func:`same_person_of` is the probability a candidate's confirmation records. Both need the
gallery's appearance vectors and the service's appearance model with its same-person
calibration; without them a 409 says what to do. A candidate is confirmed or ruled out like any
result (``POST .../confirm`` with ``follow_of``, ``POST .../feedback``): one crop at a time, audited,
and in the export with its probability.

Ingestion's tracklet links (:mod:`minterpr.ingest.links`) are a hint: a judgement acts on a crop's
whole link group only when the analyst asks (``group: true``): :func:`group_rows` names one crop of
each other linked track in the session's scope, each then judged as its own turn.

Example (``live`` a session whose crop 7 the analyst confirmed):
    >>> view = follow_view(live, 7)  # doctest: +SKIP
    >>> [(lane.camera, [c.same_person for c in lane.candidates]) for lane in view.cameras]  # doctest: +SKIP
    [('station:cam2', [0.91, 0.64]), ('mall:cam1', [0.32])]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minterpr.ingest.links import seen_at_once
from minterpr.interaction.follow import FollowConfig, follow, same_person_probabilities
from minterpr.interaction.pair_scores import gallery_pairs
from minterpr.serving.errors import ApiError
from minterpr.serving.schemas.search import FollowCandidateView, FollowLane, FollowView

STATEMENT = (
    "These crops may show the same person as the crop you confirmed: each figure is the appearance "
    "model's probability that two crops show one person, fitted on other cameras. Where many people "
    "look alike (a crowd seen from above) it runs high: use it to choose what to look at first, not as "
    "odds. It is not an identification. Confirm or rule out each one yourself."
)
UPDATE_HINT = "`minterpr index build --update`"  # adds appearance vectors to a gallery without them


def _calibration(live: Any) -> Any:
    """The appearance vectors' same-person calibration, or a 409 saying what is missing."""
    from minterpr.index.store.gallery_store import read_manifest

    gallery = live.gallery
    if gallery.index.appearance is None:
        raise ApiError(
            409,
            "no_appearance",
            f"gallery {gallery.name!r} has no appearance vectors, which following a "
            f"person needs: add them with {UPDATE_HINT}",
        )
    looks = getattr(gallery.pipeline, "appearance", None)
    if looks is None or looks.same_person is None:
        raise ApiError(
            409,
            "no_same_person",
            "the service has no calibrated appearance model to follow a person "
            "with: serve with an appearance model whose same-person calibration is fitted "
            "(`minterpr calibrate appearance`)",
        )
    stored = (read_manifest(gallery.directory).appearance or {}).get("model_fingerprint")
    if stored is not None and stored != looks.fingerprint:
        raise ApiError(
            409,
            "no_appearance",
            f"gallery {gallery.name!r} has appearance vectors of another model "
            f"({stored}, the service's is {looks.fingerprint}): rebuild them with {UPDATE_HINT}",
        )
    return looks.same_person


def _confirmed_anchor(live: Any, gallery_index: int) -> int:
    local = live.positions.to_local(gallery_index)
    if local is None:
        raise ApiError(
            422,
            "out_of_scope",
            f"gallery_index {gallery_index} is not an image this session may search",
            field="gallery_index",
        )
    if live.session.judgements.get(local) is not True:
        raise ApiError(
            409,
            "not_confirmed",
            f"image {gallery_index} is not confirmed in this session: follow a person from a crop you confirmed",
            field="gallery_index",
        )
    return local


def _track_rows(live: Any, gallery_index: int) -> set[int]:
    meta = live.gallery.metadata[gallery_index]
    if meta.get("track") is None:
        return set()
    return {
        i
        for i, m in enumerate(live.gallery.metadata)
        if m.get("track") == meta["track"] and m.get("source") == meta.get("source")
    }


def linked_tracks(gallery: Any) -> dict[str, list[list[int]]]:
    """link group -> its tracks' rows (one list per track, in gallery order), computed once per opened gallery."""
    cached = getattr(gallery, "_link_tracks", None)
    if cached is None:
        tracks: dict[str, dict[tuple[Any, Any], list[int]]] = {}
        for i, meta in enumerate(gallery.metadata):
            if meta.get("link") is not None:
                tracks.setdefault(meta["link"], {}).setdefault((meta.get("source"), meta.get("track")), []).append(i)
        cached = {link: list(by_track.values()) for link, by_track in tracks.items()}
        gallery._link_tracks = cached
    return cached


def group_rows(live: Any, gallery_index: int) -> list[int]:
    """One in-scope crop (the first) of each other track in ``gallery_index``'s link group not judged yet:
    what a judgement with ``group: true`` also judges. [] for a crop linked to no other track."""
    link = live.gallery.metadata[gallery_index].get("link")
    if link is None:
        return []
    judged, out = live.session.judgements, []
    for rows in linked_tracks(live.gallery).get(link, []):
        if gallery_index in rows:
            continue
        inside = [i for i in rows if live.positions.to_local(i) is not None]
        if inside and not any(judged.get(live.positions.to_local(i)) is not None for i in inside):
            out.append(inside[0])
    return out


def follow_view(live: Any, gallery_index: int, config: FollowConfig = FollowConfig()) -> FollowView:
    """The candidates of confirmed crop ``gallery_index`` (see the module doc)."""
    calibration = _calibration(live)
    _confirmed_anchor(live, gallery_index)
    gallery, positions = live.gallery, live.positions
    rows = range(positions.gallery_size) if positions.rows is None else positions.rows.tolist()
    pairs = gallery_pairs(gallery.index)
    lanes = follow(
        np.asarray(gallery.index.compared_appearance()),
        gallery_index,
        calibration,
        cameras=gallery.cameras.tolist(),
        times=gallery.times.tolist(),
        rows=rows,
        # its own track (already its person) and tracks seen at the same time in its video (never its person)
        exclude=_track_rows(live, gallery_index) | set(seen_at_once(gallery.metadata, gallery_index)),
        config=config,
        pairs=pairs,
    )
    link = gallery.metadata[gallery_index].get("link")
    judged = live.session.judgements
    out = []
    for lane in lanes:
        views = []
        for c in lane.candidates:
            path, camera, time = live.image_info(c.row)
            views.append(
                FollowCandidateView(
                    gallery_index=c.row,
                    path=path,
                    camera=camera,
                    time=time,
                    same_person=round(c.probability, 4),
                    linked=link is not None and gallery.metadata[c.row].get("link") == link,
                    judgement=judged.get(positions.to_local(c.row)),
                )
            )
        out.append(FollowLane(camera=lane.camera, candidates=views))
    fit = calibration if pairs is None else pairs.calibration
    base = fit.base_rate if config.base_rate is None else config.base_rate
    return FollowView(
        session_id=live.session_id, gallery_index=gallery_index, cameras=out, base_rate=base, statement=STATEMENT
    )


def same_person_of(live: Any, follow_of: int, gallery_index: int, config: FollowConfig = FollowConfig()) -> float:
    """The same-person probability of ``gallery_index`` with confirmed crop ``follow_of`` (what its
    confirmation from the follow panel records)."""
    calibration = _calibration(live)
    _confirmed_anchor(live, follow_of)
    if follow_of == gallery_index:
        raise ApiError(422, "invalid", "follow_of: the crop followed, not the candidate", field="follow_of")
    pairs = gallery_pairs(live.gallery.index)
    if pairs is not None:
        return round(float(pairs.probability([follow_of], base_rate=config.base_rate)[0, gallery_index]), 4)
    p = same_person_probabilities(
        np.asarray(live.gallery.index.compared_appearance()), follow_of, [gallery_index], calibration, config.base_rate
    )
    return round(float(p[0]), 4)
