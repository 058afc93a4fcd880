"""The case-scope probe of ``probe_service.py``: a session of a case narrowed to one camera and an hour
shows nothing else, and cannot be widened (another camera, a wider time window)."""

from __future__ import annotations

from typing import Any

from probe_service_common import Ctx, got


# ----------------------------------------------------------------------------- case scope
def scope(ctx: Ctx) -> None:
    cat = "case-scope widening"
    with ctx.http("ana") as http:
        view = http.get(f"/api/sessions/{ctx.narrow_sid}", params={"top": 1000}).json()
        inside = {r["gallery_index"] for r in view["results"]}
        size = view.get("gallery_size") or 24
        outside = sorted(set(range(size)) - inside)
        times = sorted(str(r.get("time")) for r in view["results"])
        ctx.record(
            cat,
            "the narrow session shows only cam:north, 08:00-09:00",
            "every result inside",
            f"{sorted({r['camera'] for r in view['results']})} {times[:1]}..{times[-1:]}",
            bool(inside) and all(r["camera"] == "cam:north" and _within(r.get("time")) for r in view["results"]),
        )
        for cameras, start, end, name in (
            (["cam:south"], None, None, "another camera"),
            (["cam:north", "cam:south"], None, None, "one more camera"),
            (None, "2026-03-01T00:00:00Z", "2026-03-03T00:00:00Z", "a wider time window"),
        ):
            r = http.post(
                "/api/sessions",
                json={"case_id": ctx.narrow_case, "gallery": "test", "cameras": cameras, "start": start, "end": end},
            )
            if r.status_code == 201:
                results = http.get(f"/api/sessions/{r.json()['session_id']}", params={"top": 1000}).json()["results"]
                widened = {x["gallery_index"] for x in results} - inside
                ctx.record(
                    cat,
                    f"a session asking for {name}",
                    "refused, or narrowed to the case",
                    f"201, {len(widened)} outside",
                    not widened,
                )
            else:
                ctx.record(
                    cat,
                    f"a session asking for {name}",
                    "refused, or narrowed to the case",
                    got(r),
                    400 <= r.status_code < 500,
                )
        for index in outside[:4]:
            for move, body in (
                ("feedback", {"gallery_index": index, "text": "not him"}),
                ("example", {"gallery_index": index}),
                ("confirm", {"gallery_index": index, "acknowledge": True}),
            ):
                r = http.post(f"/api/sessions/{ctx.narrow_sid}/{move}", json=body)
                ctx.record(
                    cat, f"{move} on out-of-scope image {index}", "422 out_of_scope", got(r), r.status_code == 422
                )
            for path in (
                f"/api/sessions/{ctx.narrow_sid}/images/{index}",
                f"/api/sessions/{ctx.narrow_sid}/images/{index}?full=1",
                f"/api/sessions/{ctx.narrow_sid}/images/{index}/frame",
            ):
                r = http.get(path)
                ctx.record(
                    cat,
                    f"GET {path.split(ctx.narrow_sid)[1]} (out of scope)",
                    "4xx, no image",
                    got(r),
                    400 <= r.status_code < 500,
                )
        r = http.post("/api/sessions", json={"case_id": ctx.closed_case, "gallery": "test"})
        ctx.record(cat, "a session in a closed case", "409 case_closed", got(r), r.status_code == 409)
        r = http.post(f"/api/sessions/{ctx.closed_sid}/describe", json={"text": "a man"})
        ctx.record(cat, "a move in a closed case's session", "409 case_closed", got(r), r.status_code == 409)
        r = http.post("/api/sessions", json={"case_id": ctx.narrow_case, "gallery": "nope"})
        ctx.record(cat, "a session over a gallery that does not exist", "404/422", got(r), r.status_code in (404, 422))
        r = http.post("/api/sessions", json={"case_id": 10**6, "gallery": "test"})
        ctx.record(cat, "a session in a case that does not exist", "404", got(r), r.status_code == 404)
    with ctx.http("ana", via="cookie") as http:
        for index in outside[:2]:
            for path in (f"/sessions/{ctx.narrow_sid}/thumb/{index}", f"/sessions/{ctx.narrow_sid}/look/{index}"):
                r = http.get(path)
                ctx.record(
                    cat,
                    f"page GET {path.split(ctx.narrow_sid)[1]} (out of scope)",
                    "4xx",
                    got(r),
                    400 <= r.status_code < 500,
                )


def _within(when: Any) -> bool:
    import datetime as dt

    t = dt.datetime.fromisoformat(str(when).replace("Z", "+00:00"))
    return dt.datetime(2026, 3, 2, 8, tzinfo=dt.timezone.utc) <= t <= dt.datetime(2026, 3, 2, 9, tzinfo=dt.timezone.utc)
