"""The login pages: ``/`` (to the cases or the login), ``/login`` (form and post) and ``/logout``."""

from typing import Any

from minterpr.serving.errors import ApiError
from minterpr.serving.pages.site import Pages, redirect, safe_next


def register_login(router: Any, pages: Pages) -> None:
    """Add the login routes to ``router``."""
    from fastapi import Depends, Form, Query, Request

    from minterpr.serving.deps import (
        clear_login_cookies,
        client_address,
        current_user,
        optional_user,
        refuse_cross_site,
        set_login_cookies,
    )

    @router.get("/")
    def home(user: Any = Depends(optional_user)) -> Any:
        return redirect("/cases" if user is not None else "/login")

    @router.get("/login")
    def login_page(
        request: Request, next: str = Query("/cases", max_length=500), user: Any = Depends(optional_user)
    ) -> Any:
        if user is not None:
            return redirect(safe_next(next))
        return pages.render(request, "login.html", next=safe_next(next), username="", error=None)

    @router.post("/login")
    def login(
        request: Request,
        username: str = Form("", max_length=64),
        password: str = Form("", max_length=256),
        next: str = Form("/cases", max_length=500),
    ) -> Any:
        refuse_cross_site(request)
        try:
            grant = pages.services.accounts.login(username, password, client=client_address(request))
        except ApiError as err:
            return pages.render(
                request, "login.html", err.status, next=safe_next(next), username=username, error=err.message
            )
        response = redirect(safe_next(next))
        set_login_cookies(response, grant, pages.settings)
        return response

    @router.post("/logout")
    def logout(user: Any = Depends(current_user)) -> Any:
        pages.services.accounts.logout(user)
        response = redirect("/login")
        clear_login_cookies(response)
        return response
