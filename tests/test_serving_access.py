"""Access to the service: logins and API keys, roles, CSRF on cookie requests, rate limits,
password hashing, and a bootstrap that never shows a password."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from support.serving import PASSWORD, login, open_case, prepare, settings, shared_world

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return shared_world(tmp_path_factory)


def _client(world, tmp_path, **overrides):
    from minterpr.serving.app import create_app

    services = prepare(tmp_path / "state", *world, **overrides)
    return TestClient(create_app(services.settings, services)), services


def test_passwords_are_stored_as_scrypt_hashes_and_checked(world, tmp_path):
    from minterpr.serving.db import User, select

    client, services = _client(world, tmp_path)
    with client:
        with services.db.transaction() as tx:
            stored = tx.scalar(select(User.password_hash).where(User.username == "ana"))
        assert stored.startswith("$argon2id$v=19$m=65536,t=3,p=4$") and PASSWORD not in stored  # was scrypt n=2**14
        wrong = client.post("/api/auth/login", json={"username": "ana", "password": "not the password"})
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "unauthenticated"
        nobody = client.post("/api/auth/login", json={"username": "nobody", "password": "whatever it is"})
        assert nobody.status_code == 401 and nobody.json() == wrong.json()  # no hint which part was wrong
        assert client.get("/api/auth/me").status_code == 401
        login(client, "ana")
        me = client.get("/api/auth/me").json()
        assert me["username"] == "ana" and me["via"] == "cookie" and "session:search" in me["permissions"]
        client.post("/api/auth/logout", headers={"X-CSRF-Token": client.cookies.get("minterpr_csrf")})
        assert client.get("/api/auth/me").status_code == 401
        audit = [e["action"] for e in services.audit.entries(limit=1000)]
        assert audit.count("login_failed") == 2 and "login" in audit and "logout" in audit
        weak = services.accounts
        with pytest.raises(ValueError, match="10 to 256 characters"):
            weak.create_user("eve", "short", "viewer")


def test_cookie_requests_need_the_csrf_token_and_api_keys_do_not(world, tmp_path):
    client, services = _client(world, tmp_path)
    with client:
        headers = login(client, "ana")
        body = {
            "title": "t",
            "purpose": "report 12 authorised by the duty officer",
            "cameras": None,
            "start": None,
            "end": None,
        }
        for sent in ({}, {"X-CSRF-Token": "forged"}):
            response = client.post("/api/cases", json=body, headers=sent)
            assert response.status_code == 403 and response.json()["error"]["code"] == "csrf_failed"
        assert client.post("/api/cases", json=body, headers=headers).status_code == 201
        assert client.get("/api/cases").status_code == 200  # reads need no token
        key = client.post("/api/keys", json={"name": "script"}, headers=headers).json()
        assert key["key"].startswith("mk_")
        bare = TestClient(client.app)
        by_key = bare.post("/api/cases", json=body, headers={"X-API-Key": key["key"]})
        assert by_key.status_code == 201 and by_key.json()["created_by"] == "ana"
        listed = client.get("/api/keys").json()
        assert [k["prefix"] for k in listed] == [key["key"][:10]] and "key" not in listed[0]
        assert client.delete(f"/api/keys/{key['id']}", headers=headers).status_code == 204
        revoked = bare.get("/api/cases", headers={"X-API-Key": key["key"]})
        assert revoked.status_code == 401 and revoked.json()["error"]["message"] == "unknown or revoked API key"


def test_role_permissions(world, tmp_path):
    client, _ = _client(world, tmp_path)
    with client:
        expected = {  # user -> (open a case, list galleries, read the audit log, create a user)
            "root": (201, 200, 403, 201),
            "ana": (201, 200, 403, 403),
            "vic": (403, 200, 403, 403),
            "aud": (403, 200, 200, 403),
        }
        for k, (user, codes) in enumerate(expected.items()):
            c = TestClient(client.app)
            headers = login(c, user)
            body = {
                "title": "t",
                "purpose": "report 12 authorised by the duty officer",
                "cameras": None,
                "start": None,
                "end": None,
            }
            got = (
                c.post("/api/cases", json=body, headers=headers).status_code,
                c.get("/api/galleries").status_code,
                c.get("/api/audit/verify").status_code,
                c.post(
                    "/api/admin/users",
                    json={"username": f"new{k}", "password": "a long passphrase", "role": "viewer"},
                    headers=headers,
                ).status_code,
            )
            assert got == codes, user


def test_login_and_turns_are_rate_limited(world, tmp_path):
    from minterpr.serving.settings import RateSpec

    client, _ = _client(world, tmp_path, login_rate=RateSpec(0.01, 3), search_rate=RateSpec(0.01, 2))
    with client:
        codes = [
            client.post("/api/auth/login", json={"username": "vic", "password": "wrong password"}).status_code
            for _ in range(4)
        ]
        assert codes == [401, 401, 401, 429]
        refused = client.post("/api/auth/login", json={"username": "vic", "password": PASSWORD})
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
        headers = login(client, "ana")  # another username: its own bucket
        case = open_case(client, headers)
        sid = client.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()[
            "session_id"
        ]
        turns = [
            client.post(f"/api/sessions/{sid}/describe", json={"text": "a man"}, headers=headers) for _ in range(3)
        ]
        assert [t.status_code for t in turns] == [200, 200, 429]
        assert turns[-1].json()["error"]["code"] == "rate_limited"
        assert client.get(f"/api/sessions/{sid}").json()["turns"] == 2  # the refused turn left nothing


def test_bootstrap_reads_the_password_and_never_prints_it(tmp_path):
    data = tmp_path / "state"
    secret = "a very secret passphrase 42"
    command = [sys.executable, "-m", "minterpr", "serve", "--data", str(data), "--create-admin", "root", "--no-serve"]
    done = subprocess.run(command, input=secret + "\n", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert secret not in done.stdout + done.stderr and "admin 'root' created" in done.stdout + done.stderr
    again = subprocess.run(
        [sys.executable, "-m", "minterpr", "users", "add", "ana", "--role", "analyst", "--data", str(data)],
        input=secret + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0 and secret not in again.stdout + again.stderr
    twice = subprocess.run(command, input=secret + "\n", capture_output=True, text=True, timeout=120)
    assert twice.returncode == 2 and twice.stderr.strip() == "minterpr serve: error: user 'root' exists"
    from minterpr.serving.service import build_services

    services = build_services(settings(data))
    try:
        assert services.accounts.login("root", secret, client="test").principal.role == "admin"
        log = "".join(services.audit.export_lines())
        assert secret not in log and (data / "minterpr.db").is_file()
        assert not any(secret.encode() in p.read_bytes() for p in data.iterdir() if p.is_file())
    finally:
        services.close()
    listing = io.StringIO()
    from minterpr.cli.main import build_parser
    from minterpr.cli.commands.users import cmd_list

    assert cmd_list(build_parser().parse_args(["users", "list", "--data", str(data)]), listing) == 0
    assert listing.getvalue().split("\n")[:2] == ["root\tadmin", "ana\tanalyst"]
