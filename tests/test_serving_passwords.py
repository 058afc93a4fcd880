"""Password hashes: Argon2id now; an older release's scrypt hash still verifies and is replaced by an
Argon2id one at the next login, as is an Argon2id hash of other parameters; a wrong password
changes nothing."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

pytest.importorskip("argon2")
PASSWORD = "correct horse battery staple"


def _scrypt(password: str, n: int = 2**14) -> str:
    """A hash as the release before made them (security.py then)."""
    salt = b"0123456789abcdef"
    digest = hashlib.scrypt(password.encode(), salt=salt, n=n, r=8, p=1, dklen=32, maxmem=64 * 1024 * 1024)
    return "$".join(["scrypt", str(n), "8", "1", base64.b64encode(salt).decode(), base64.b64encode(digest).decode()])


def test_old_scrypt_hashes_verify():
    from minterpr.serving.security import needs_rehash, verify_password

    old = _scrypt(PASSWORD)
    assert verify_password(PASSWORD, old) and not verify_password("not the password", old)
    assert needs_rehash(old)
    assert not verify_password(PASSWORD, "scrypt$broken") and not verify_password(PASSWORD, "$argon2id$nonsense")


def _accounts_with(stored: str):
    from minterpr.serving.accounts import Accounts
    from minterpr.serving.db import Database, User
    from minterpr.serving.settings import ServeSettings

    accounts = Accounts(Database("sqlite://"), ServeSettings(data_dir=Path(".")))
    with accounts.db.write() as tx:
        tx.add(User(username="ana", password_hash=stored, role="analyst", created=0.0))
    return accounts


def _stored(accounts) -> str:
    from minterpr.serving.db import User, select

    with accounts.db.transaction() as tx:
        return tx.scalar(select(User.password_hash).where(User.username == "ana"))


@pytest.mark.parametrize("old", [_scrypt(PASSWORD), "weaker argon2"])
def test_a_login_rehashes_an_old_hash(old):
    from argon2 import PasswordHasher

    from minterpr.serving.errors import ApiError
    from minterpr.serving.security import needs_rehash

    if old == "weaker argon2":
        old = PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1).hash(PASSWORD)
    accounts = _accounts_with(old)
    with pytest.raises(ApiError):
        accounts.login("ana", "not the password", client="test")
    assert _stored(accounts) == old  # a wrong password changes nothing
    accounts.login("ana", PASSWORD, client="test")
    new = _stored(accounts)
    assert new.startswith("$argon2id$v=19$m=65536,t=3,p=4$") and not needs_rehash(new)
    accounts.login("ana", PASSWORD, client="test")  # the new hash verifies, and stays
    assert _stored(accounts) == new
