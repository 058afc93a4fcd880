"""``GET /metrics``: the Prometheus scrape (:mod:`minterpr.serving.metrics`), for admins or the
configured bearer token (``settings.metrics_token``)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from minterpr.serving.accounts import Principal
from minterpr.serving.deps import get_services, optional_user
from minterpr.serving.errors import ApiError
from minterpr.serving.security import same

router = APIRouter()


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request, principal: Principal | None = Depends(optional_user)) -> Response:
    services = get_services(request)
    token = services.settings.metrics_token
    sent = request.headers.get("authorization", "")
    if token is not None and sent.startswith("Bearer ") and same(sent[len("Bearer ") :], token):
        pass
    elif principal is None:
        raise ApiError(401, "unauthenticated", "log in as an admin, or send the metrics token as a bearer token")
    elif principal.role != "admin":
        raise ApiError(403, "forbidden", f"the {principal.role} role may not read metrics")
    body, content_type = request.app.state.metrics.render()
    return Response(body, media_type=content_type)
