"""Users, logins (cookie tokens) and API keys: created, checked, revoked, audited.

A :class:`Principal` is who a request acts as. :meth:`Accounts.login` checks a password
(rate-limited per client address and, separately, per username — unknown names included — so
neither many names from one client nor one name from many clients gets through; a failed attempt is audited without the password) and
returns a :class:`LoginGrant` whose token goes in the session cookie and whose CSRF token in
the double-submit cookie. Only hashes of tokens and keys are stored.

Example:
    >>> from pathlib import Path
    >>> from minterpr.serving.db import Database
    >>> from minterpr.serving.settings import ServeSettings
    >>> accounts = Accounts(Database("sqlite://"), ServeSettings(data_dir=Path(".")))
    >>> accounts.create_user("ana", "a long passphrase", "analyst")
    1
    >>> grant = accounts.login("ana", "a long passphrase", client="127.0.0.1")
    >>> accounts.from_login_token(grant.token).username
    'ana'
    >>> accounts.login("ana", "wrong password", client="127.0.0.1")
    Traceback (most recent call last):
    ...
    minterpr.serving.errors.ApiError: wrong username or password
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from minterpr.errors import InputError
from minterpr.serving import audit
from minterpr.serving.db import ApiKey, Database, Login, User, now
from minterpr.serving.errors import ApiError
from minterpr.serving.ratelimit import RateLimiter
from minterpr.serving.security import (
    ROLES,
    check_password_strength,
    dummy_verify,
    hash_password,
    needs_rehash,
    new_token,
    token_hash,
    verify_password,
)
from minterpr.serving.settings import ServeSettings

_USERNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{1,63}$")
KEY_PREFIX = "mk_"  # API keys look like mk_<43 characters>


@dataclass(frozen=True)
class Principal:
    """Who a request acts as."""

    user_id: int
    username: str
    role: str  # viewer | analyst | admin | auditor
    via: str  # "cookie" or "api_key"
    login_id: int | None = None  # the login (cookie) it came with
    csrf_token: str | None = None  # that login's double-submit token
    key_id: int | None = None  # the API key it came with


@dataclass(frozen=True)
class LoginGrant:
    """A successful login: the cookie token (shown once), its CSRF token and expiry."""

    token: str
    csrf_token: str
    expires: float  # UNIX seconds
    principal: Principal


class Accounts:
    """User accounts over the database (see the module doc)."""

    def __init__(self, db: Database, settings: ServeSettings) -> None:
        self.db = db
        self.settings = settings
        self.login_limiter = RateLimiter(settings.login_rate)  # per account
        self.client_limiter = RateLimiter(settings.login_client_rate)  # per client address

    # ----- users ---------------------------------------------------------------------------------
    def create_user(self, username: str, password: str, role: str, *, by: str | None = None) -> int:
        """A new user; InputError for a bad name, role or weak password, ApiError 409 when the name is taken."""
        if not isinstance(username, str) or not _USERNAME.match(username):
            raise InputError("a username has 2-64 letters, digits or . _ @ - and starts with a letter or digit")
        if role not in ROLES:
            raise InputError(f"unknown role {role!r}: must be one of {', '.join(ROLES)}")
        check_password_strength(password)
        hashed = hash_password(password)
        with self.db.write() as tx:
            if tx.scalar(select(User.id).where(User.username == username)) is not None:
                raise ApiError(409, "exists", f"user {username!r} exists", field="username")
            user = User(username=username, password_hash=hashed, role=role, created=now())
            tx.add(user)
            tx.flush()
            audit.append(tx, by, "user_create", None, {"username": username, "role": role})
            return user.id

    def set_password(self, username: str, password: str, *, by: str | None = None) -> None:
        check_password_strength(password)
        hashed = hash_password(password)
        with self.db.write() as tx:
            user = tx.scalar(select(User).where(User.username == username))
            if user is None:
                raise ApiError(404, "not_found", f"no user {username!r}", field="username")
            user.password_hash = hashed
            audit.append(tx, by, "password_set", None, {"username": username})

    def users(self) -> list[dict[str, Any]]:
        with self.db.transaction() as tx:
            return [
                {"id": u.id, "username": u.username, "role": u.role, "disabled": u.disabled}
                for u in tx.scalars(select(User).order_by(User.id))
            ]

    def count_admins(self) -> int:
        with self.db.transaction() as tx:
            return len(tx.scalars(select(User.id).where(User.role == "admin", User.disabled.is_(False))).all())

    # ----- logins --------------------------------------------------------------------------------
    def login(self, username: str, password: str, *, client: str) -> LoginGrant:
        """Check the password and open a login; 429 when this client or this username was tried too often,
        401 when wrong."""
        wait = self.client_limiter.take(client) or self.login_limiter.take(username.lower())
        if wait > 0:
            raise ApiError(
                429,
                "rate_limited",
                f"too many login attempts; try again in {wait:.0f} s",
                headers={"Retry-After": str(max(1, round(wait)))},
            )
        with self.db.transaction() as tx:
            user = tx.scalar(select(User).where(User.username == username))
        if user is None or user.disabled:
            dummy_verify()
            ok = False
        else:
            ok = verify_password(password, user.password_hash)
        rehashed = hash_password(password) if ok and needs_rehash(user.password_hash) else None  # old scheme/parameters
        with self.db.write() as tx:
            if rehashed is not None:
                tx.get(User, user.id).password_hash = rehashed
            if not ok:
                audit.append(tx, username[:64], "login_failed", None, {"client": client})
            else:
                token, csrf = new_token(), new_token()
                created = now()
                login = Login(
                    user_id=user.id,
                    token_hash=token_hash(token),
                    csrf_token=csrf,
                    created=created,
                    expires=created + self.settings.login_ttl_hours * 3600,
                )
                tx.add(login)
                tx.flush()
                audit.append(tx, user.username, "login", None, {"client": client, "via": "password"})
        if not ok:
            raise ApiError(401, "unauthenticated", "wrong username or password")
        return LoginGrant(
            token, csrf, login.expires, Principal(user.id, user.username, user.role, "cookie", login.id, csrf)
        )

    def logout(self, principal: Principal) -> None:
        with self.db.write() as tx:
            if principal.login_id is not None:
                login = tx.get(Login, principal.login_id)
                if login is not None:
                    login.revoked = True
            audit.append(tx, principal.username, "logout", None, {"via": principal.via})

    def from_login_token(self, token: str) -> Principal | None:
        """The principal of a live login cookie, else None."""
        with self.db.transaction() as tx:
            row = tx.execute(
                select(Login, User).join(User, User.id == Login.user_id).where(Login.token_hash == token_hash(token))
            ).first()
        if row is None:
            return None
        login, user = row
        if login.revoked or login.expires < now() or user.disabled:
            return None
        return Principal(user.id, user.username, user.role, "cookie", login.id, login.csrf_token)

    # ----- API keys ------------------------------------------------------------------------------
    def create_api_key(self, principal: Principal, name: str) -> tuple[int, str]:
        """A new key for ``principal``'s user: (id, the key — shown this once, stored hashed)."""
        if not isinstance(name, str) or not name.strip() or len(name) > 100:
            raise InputError("an API key needs a name of 1-100 characters")
        key = KEY_PREFIX + new_token()
        with self.db.write() as tx:
            row = ApiKey(
                user_id=principal.user_id, name=name.strip(), key_hash=token_hash(key), prefix=key[:10], created=now()
            )
            tx.add(row)
            tx.flush()
            audit.append(tx, principal.username, "key_create", None, {"key_id": row.id, "name": row.name})
            return row.id, key

    def api_keys(self, principal: Principal) -> list[dict[str, Any]]:
        with self.db.transaction() as tx:
            rows = tx.scalars(select(ApiKey).where(ApiKey.user_id == principal.user_id).order_by(ApiKey.id))
            return [
                {"id": r.id, "name": r.name, "prefix": r.prefix, "created": r.created, "revoked": r.revoked}
                for r in rows
            ]

    def revoke_api_key(self, principal: Principal, key_id: int) -> None:
        with self.db.write() as tx:
            row = tx.get(ApiKey, key_id)
            if row is None or (row.user_id != principal.user_id and principal.role != "admin"):
                raise ApiError(404, "not_found", f"no API key {key_id}", field="key_id")
            row.revoked = True
            audit.append(tx, principal.username, "key_revoke", None, {"key_id": key_id})

    def from_api_key(self, key: str) -> Principal | None:
        if not key.startswith(KEY_PREFIX) or len(key) > 100:
            return None
        with self.db.transaction() as tx:
            row = tx.execute(
                select(ApiKey, User).join(User, User.id == ApiKey.user_id).where(ApiKey.key_hash == token_hash(key))
            ).first()
        if row is None or row[0].revoked or row[1].disabled:
            return None
        return Principal(row[1].id, row[1].username, row[1].role, "api_key", key_id=row[0].id)
