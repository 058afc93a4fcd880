"""Passwords, tokens and who may do what.

Passwords are hashed with Argon2id (argon2-cffi's RFC 9106 "low memory" profile: t=3, m=64 MiB,
p=4, a 16-byte random salt). Hashes of the previous releases (scrypt, ``scrypt$n$r$p$salt$hash``)
still verify; :func:`needs_rehash` says when a stored hash is of another scheme or other
parameters, and a login then stores a new one. API keys and login tokens are 32 random bytes; only
their SHA-256 is stored (a random 256-bit secret needs no slow hash), so a copy of the database
lets nobody log in.

Example:
    >>> stored = hash_password("correct horse battery staple")
    >>> stored.startswith("$argon2id$v=19$m=65536,t=3,p=4$"), verify_password("correct horse battery staple", stored)
    (True, True)
    >>> verify_password("wrong", stored), needs_rehash(stored)
    (False, False)
    >>> allowed("analyst", "session:search"), allowed("auditor", "session:search"), allowed("auditor", "audit:read")
    (True, False, True)
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import secrets
from typing import Any

from minterpr.errors import InputError

ROLES = ("viewer", "analyst", "admin", "auditor")
_VIEW = frozenset({"gallery:read", "case:read", "session:read"})
_SEARCH = frozenset({"case:open", "session:search", "session:confirm", "session:export"})
_MANAGE = frozenset({"gallery:manage", "ingest:run", "user:manage", "retention:run"})
# role -> what it may do. The auditor reads the audit log but cannot search; nobody but the
# auditor reads the audit log, so those who search cannot read or export the record of it.
PERMISSIONS: dict[str, frozenset[str]] = {
    "viewer": _VIEW,
    "analyst": _VIEW | _SEARCH,
    "admin": _VIEW | _SEARCH | _MANAGE,
    "auditor": _VIEW | {"audit:read"},
}

MIN_PASSWORD_CHARS = 10  # shortest password accepted
MAX_PASSWORD_CHARS = 256  # longest (the hash would take any, a request should not)
_SCRYPT_MAXMEM = 256 * 1024 * 1024  # enough for an old scrypt hash at up to n=2**17, r=8


def allowed(role: str, permission: str) -> bool:
    """Whether ``role`` has ``permission`` (an unknown role has none)."""
    return permission in PERMISSIONS.get(role, frozenset())


def check_password_strength(password: str) -> None:
    """InputError unless ``password`` is a string of 10..256 characters that is not all one character."""
    if not isinstance(password, str) or not MIN_PASSWORD_CHARS <= len(password) <= MAX_PASSWORD_CHARS:
        raise InputError(f"a password must have {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters")
    if len(set(password)) < 3:
        raise InputError("a password must not repeat one or two characters")


@functools.cache
def _hasher() -> Any:
    """argon2-cffi's hasher at its RFC 9106 low-memory profile (the serve extra installs it)."""
    from argon2 import PasswordHasher, profiles

    return PasswordHasher.from_parameters(profiles.RFC_9106_LOW_MEMORY)


def hash_password(password: str) -> str:
    """The Argon2id hash (PHC string, ``$argon2id$v=19$m=...,t=...,p=...$salt$hash``) of ``password``
    with a fresh random salt."""
    return _hasher().hash(password.encode("utf-8", "surrogatepass"))


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` hashes to ``stored`` (Argon2id, or an older release's scrypt; constant-time
    comparison; False for a malformed hash)."""
    if stored.startswith("scrypt$"):
        return _verify_scrypt(password, stored)
    from argon2.exceptions import InvalidHashError, VerificationError

    try:
        return _hasher().verify(stored, password.encode("utf-8", "surrogatepass"))
    except (VerificationError, InvalidHashError):
        return False


def needs_rehash(stored: str) -> bool:
    """Whether ``stored`` is of an older scheme or other parameters than :func:`hash_password` makes."""
    from argon2.exceptions import InvalidHashError

    if not stored.startswith("$argon2id$"):
        return True
    try:
        return _hasher().check_needs_rehash(stored)
    except InvalidHashError:
        return True


def _verify_scrypt(password: str, stored: str) -> bool:
    """An older release's ``scrypt$n$r$p$salt$hash`` (base64)."""
    try:
        _, n, r, p, salt, digest = stored.split("$")
        expected = base64.b64decode(digest)
        actual = hashlib.scrypt(
            password.encode("utf-8", "surrogatepass"),
            salt=base64.b64decode(salt),
            n=int(n),
            r=int(r),
            p=int(p),
            dklen=len(expected),
            maxmem=_SCRYPT_MAXMEM,
        )
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(actual, expected)


def dummy_verify() -> None:
    """Spend the time of one verification (login for an unknown user takes as long as a wrong password)."""
    verify_password("x", _dummy_hash())


def new_token() -> str:
    """32 random bytes, URL-safe base64 (43 characters)."""
    return secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    """What is stored of a token or key: its SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def same(a: str, b: str) -> bool:
    """Constant-time string comparison."""
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


@functools.cache
def _dummy_hash() -> str:
    return hash_password(secrets.token_urlsafe(12))
