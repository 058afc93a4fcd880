"""What the search page shows: the page's camera / time filters and result count, the results that
pass them, the images ruled out and the references asked about, where the focus goes and what is announced."""

from typing import Any

from markupsafe import Markup, escape

from minterpr.serving.errors import ApiError
from minterpr.serving.export_report import EVIDENCE_NOTE, SIMILARITY_NOTE
from minterpr.serving.looking import footage_range, timeline_strip
from minterpr.serving.pages.site import Pages
from minterpr.serving.times import as_datetime, when


def page_filters(
    camera: str | None, start: str | None, until: str | None, shown: str | int | None = None
) -> dict[str, str]:
    """The page's query: camera / time filters and ``n``, how many results to show ("" = one turn's)."""
    return {"camera": camera or "", "from": start or "", "until": until or "", "n": str(shown or "")}


def _shown(filters: dict[str, str], per_turn: int, most: int) -> int:
    """How many results the page shows: ``n`` (rounded to whole pages of ``per_turn``) within 1..most."""
    try:
        wanted = int(filters.get("n") or per_turn)
    except ValueError:
        wanted = per_turn
    return max(per_turn, min(most, wanted))


def _reversed(filters: dict[str, str]) -> str | None:
    """The message for a time window whose start is after its end (None when it is not reversed)."""
    low, high = as_datetime(filters.get("from")), as_datetime(filters.get("until"))
    if low is None or high is None or low <= high:
        return None
    return (
        f"From {filters['from']} is after Until {filters['until']}: the time window is reversed, so no result "
        "could pass it; swap the two times or correct one (24-hour UTC). The results below are not time-filtered."
    )


def filter_results(results: list[Any], filters: dict[str, str]) -> list[Any]:
    """Results passing the page's camera / time filters (an unknown time passes no time filter)."""
    low, high = as_datetime(filters.get("from")), as_datetime(filters.get("until"))
    kept = []
    for r in results:
        if filters["camera"] and r.camera != filters["camera"]:
            continue
        if low is not None or high is not None:
            moment = as_datetime(r.time)
            if moment is None or (low is not None and moment < low) or (high is not None and moment > high):
                continue
        kept.append(r)
    return kept


def hidden_inputs(csrf: str, filters: dict[str, str]) -> Markup:
    fields = [("csrf_token", csrf)] + [(k, v) for k, v in filters.items() if v]
    return Markup("".join(f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">' for k, v in fields))


class _StandIn:
    """A reference image the system asks about that is not among the results shown."""

    def __init__(
        self, gallery_index: int, camera: str | None = None, time: str | None = None, judgement: bool | None = None
    ) -> None:
        self.gallery_index, self.rank, self.similarity = gallery_index, None, None
        self.camera, self.time, self.judgement = camera, time, judgement
        self.matches, self.contradicts, self.unsure = [], [], []
        self.same_track_as, self.linked_tracks = None, 0


def _ruled_out(search: Any, user: Any, sid: str, gallery_index: int) -> _StandIn:
    """An image the analyst ruled out that ranks below the results shown: its camera and time, no rank."""
    info = search.image_info(user, sid, gallery_index)
    return _StandIn(gallery_index, info["camera"], info["time"], judgement=False)


def session_context(pages: Pages, user: Any, sid: str, filters: dict[str, str], moved: bool) -> dict[str, Any]:
    """What the search page shows: the session's view, the results passing the page's filters, the
    references asked about that are not among them, where the focus goes and what is announced."""
    search, settings = pages.services.search, pages.settings
    count = _shown(filters, settings.results_per_turn, settings.max_results)
    filtered = any(filters[k] for k in ("camera", "from", "until"))
    top = settings.max_results if filtered else count
    asked = settings.max_results if filtered else min(count + 1, settings.max_results)  # one more: is there more?
    view = search.view(user, sid, top=asked)
    shown = set(view.action.gallery_indices) if view.action and view.action.kind == "references" else set()
    if shown - {r.gallery_index for r in view.results} and top < settings.max_results:
        view = search.view(user, sid, top=settings.max_results)
    by_index = {r.gallery_index: r for r in view.results}
    window_error = _reversed(filters)
    kept = {**filters, "from": "", "until": ""} if window_error else filters  # the fields keep what was typed
    results = filter_results(list(view.results), kept)[:count]
    # the images ruled out leave the top: every one of them shown last, struck through, under its own heading
    results = [r for r in results if r.judgement is not False]
    ruled = dict.fromkeys(
        t.gallery_index
        for t in view.timeline
        if t.kind == "feedback" and t.judgement is False and t.gallery_index is not None
    )
    ruled_out = filter_results([by_index.get(i) or _ruled_out(search, user, sid, i) for i in ruled], kept)
    outside = [by_index.get(i) or _StandIn(i) for i in sorted(shown - {r.gallery_index for r in results + ruled_out})]
    case = pages.services.cases.get_case(view.case_id)
    focus = (
        "describe"
        if view.turns == 0
        else "confirmed"
        if view.confirmed
        else None
        if not moved
        else "results"
        if view.action is None
        else "answer"
        if view.action.kind == "question"
        else "references"
    )
    status_text = f"Turn {view.turns}: {len(results)} results shown."
    if ruled_out:
        status_text += f" {len(ruled_out)} ruled out, shown last."
    more = (
        min(count + settings.results_per_turn, settings.max_results)
        if len(view.results) > count and not filtered and count < settings.max_results
        else None
    )
    if view.action is not None:
        status_text += f" The system asks: {view.action.text}"
    scope = view.scope  # the session's own scope (the case's, narrowed by the filters it was started with)
    follow, follow_error = _follow(search, user, sid, view)
    return dict(
        view=view,
        case=case,
        results=results,
        ruled_out=ruled_out,
        window_error=window_error,
        shown=shown,
        references_outside=outside,
        filters=filters,
        top=top,
        cameras=pages.cameras(view.gallery, case.cameras),
        focus=focus,
        status_text=status_text,
        filtered=", ".join(f"{k} {v if k == 'camera' else when(v)}" for k, v in filters.items() if v and k != "n"),
        more=more,
        absent=view.probably_absent,
        strip=timeline_strip(results + [r for r in ruled_out if r.rank]),
        footage=footage_range(pages.galleries(), view.gallery),
        note=SIMILARITY_NOTE,
        evidence_note=EVIDENCE_NOTE,
        scope=scope,
        max_chars=settings.max_text_chars,
        can_search=pages.allowed(user, "session:search"),
        can_confirm=pages.allowed(user, "session:confirm"),
        can_export=pages.allowed(user, "session:export"),
        follow=follow,
        follow_error=follow_error,
    )


def _follow(search: Any, user: Any, sid: str, view: Any) -> tuple[Any, str | None]:
    """(the "Follow this person" candidates of the first confirmed crop, None) after a confirmation; (None,
    why not) when the gallery or the service cannot follow (no appearance vectors, no calibration)."""
    if not view.confirmed_all:
        return None, None
    try:
        return search.follow(user, sid, view.confirmed_all[0].gallery_index), None
    except ApiError as err:
        if err.code in ("no_appearance", "no_same_person"):
            return None, err.message
        raise
