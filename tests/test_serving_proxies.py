"""Who the client is: X-Forwarded-For is believed only from configured proxies (none by default,
through the uvicorn settings ``minterpr serve`` uses), and logins are limited per client address
and per account, unknown usernames included."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from minterpr.errors import InputError
from support.serving import PASSWORD, USERS, settings

pytest.importorskip("uvicorn")


def _services(tmp_path, **overrides):
    from minterpr.serving.service import build_services

    services = build_services(settings(tmp_path / "state", **overrides))
    for name, role in USERS.items():
        services.accounts.create_user(name, PASSWORD, role)
    return services


def _login_clients(services) -> list[str]:
    return [
        e["details"]["client"] for e in services.audit.entries(limit=1000) if e["action"] in ("login", "login_failed")
    ]


def test_many_usernames_from_one_client_are_limited(tmp_path):
    from minterpr.serving.errors import ApiError
    from minterpr.serving.settings import RateSpec

    services = _services(tmp_path, login_client_rate=RateSpec(0.01, 10))
    codes = []
    for k in range(12):  # unknown usernames, each its own account bucket: the client's bucket runs out
        try:
            services.accounts.login(f"nobody{k}", "some password", client="10.1.2.3")
        except ApiError as err:
            codes.append(err.status)
    assert codes == [401] * 10 + [429, 429]
    assert len(_login_clients(services)) == 10  # refused attempts write no audit row
    services.accounts.login("ana", PASSWORD, client="10.1.2.4")  # another client is not affected
    services.close()


def test_one_account_from_many_clients_is_limited(tmp_path):
    from minterpr.serving.errors import ApiError
    from minterpr.serving.settings import RateSpec

    services = _services(tmp_path, login_rate=RateSpec(0.01, 5))
    codes = []
    for k in range(7):
        try:
            services.accounts.login("VIC" if k % 2 else "vic", "wrong password", client=f"10.0.0.{k}")
        except ApiError as err:
            codes.append(err.status)
    assert codes == [401] * 5 + [429, 429]
    services.close()


def test_trusted_proxies_are_checked():
    from minterpr.serving.settings import ServeSettings

    assert ServeSettings(data_dir=".", trusted_proxies=("10.0.0.0/8", "::1", "*")).trusted_proxies[0] == "10.0.0.0/8"
    with pytest.raises(InputError, match="trusted_proxies: 'proxy.local'"):
        ServeSettings(data_dir=".", trusted_proxies=("proxy.local",))


class _Server:
    """``minterpr serve``'s uvicorn settings over the app, in a thread, on a free loopback port."""

    def __init__(self, services, argv: list[str]) -> None:
        import uvicorn

        from minterpr.cli.main import build_parser
        from minterpr.cli.commands.serve import listen, server_config
        from minterpr.cli.shared.service_state import settings_from
        from minterpr.serving.app import create_app

        args = build_parser().parse_args(["serve", "--port", "0", *argv])
        self.sock = listen("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        app = create_app(services.settings, services)
        self.server = uvicorn.Server(server_config(app, settings_from(args), args))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        for _ in range(200):
            if self.server.started:
                return self.url
            time.sleep(0.05)
        raise AssertionError("uvicorn never started")

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()


def test_forwarded_for_from_loopback_is_ignored_by_default(tmp_path):
    from minterpr.serving.settings import RateSpec

    services = _services(tmp_path, login_client_rate=RateSpec(0.01, 10))
    with _Server(services, []) as url:
        codes = [
            httpx.post(
                f"{url}/api/auth/login",
                json={"username": f"nobody{k}", "password": "some password"},
                headers={"X-Forwarded-For": f"203.0.113.{k}"},
            ).status_code
            for k in range(12)
        ]
    assert codes == [401] * 10 + [429, 429]  # a forged address does not buy a fresh bucket
    assert set(_login_clients(services)) == {"127.0.0.1"}


def test_forwarded_for_from_a_trusted_proxy_names_the_client(tmp_path):
    services = _services(tmp_path)
    with _Server(services, ["--trusted-proxy", "127.0.0.1"]) as url:
        response = httpx.post(
            f"{url}/api/auth/login",
            json={"username": "ana", "password": PASSWORD},
            headers={"X-Forwarded-For": "198.51.100.7"},
        )
    assert response.status_code == 200
    assert _login_clients(services) == ["198.51.100.7"]
