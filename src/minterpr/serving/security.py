"""Passwords, tokens and who may do what.

Passwords are hashed with scrypt (``hashlib.scrypt``, memory-hard: n=2**14, r=8, p=1, a 16-byte
random salt) and compared in constant time. API keys and login tokens are 32 random bytes; only
their SHA-256 is stored (a random 256-bit secret needs no slow hash), so a copy of the database
lets nobody log in.

Example:
    >>> stored = hash_password("correct horse battery staple")
    >>> stored.startswith("scrypt$"), verify_password("correct horse battery staple", stored)
    (True, True)
    >>> verify_password("wrong", stored)
    False
    >>> allowed("analyst", "session:search"), allowed("auditor", "session:search"), allowed("auditor", "audit:read")
    (True, False, True)
"""
from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import secrets

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

_SCRYPT = {"n": 2**14, "r": 8, "p": 1}
MIN_PASSWORD_CHARS = 10  # shortest password accepted
MAX_PASSWORD_CHARS = 256  # longest (scrypt would take any, a request should not)


def allowed(role: str, permission: str) -> bool:
    """Whether ``role`` has ``permission`` (an unknown role has none)."""
    return permission in PERMISSIONS.get(role, frozenset())


def check_password_strength(password: str) -> None:
    """InputError unless ``password`` is a string of 10..256 characters that is not all one character."""
    if not isinstance(password, str) or not MIN_PASSWORD_CHARS <= len(password) <= MAX_PASSWORD_CHARS:
        raise InputError(f"a password must have {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters")
    if len(set(password)) < 3:
        raise InputError("a password must not repeat one or two characters")


def hash_password(password: str) -> str:
    """``scrypt$n$r$p$salt$hash`` (base64) of ``password`` with a fresh random salt."""
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode("utf-8"), salt=salt, dklen=32, maxmem=64 * 1024 * 1024, **_SCRYPT)
    return "$".join(["scrypt", str(_SCRYPT["n"]), str(_SCRYPT["r"]), str(_SCRYPT["p"]), _b64(salt), _b64(digest)])


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` hashes to ``stored`` (constant-time comparison; False for a malformed hash)."""
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        expected = base64.b64decode(digest)
        actual = hashlib.scrypt(password.encode("utf-8", "surrogatepass"), salt=base64.b64decode(salt),
                                n=int(n), r=int(r), p=int(p), dklen=len(expected), maxmem=64 * 1024 * 1024)
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


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@functools.cache
def _dummy_hash() -> str:
    return hash_password(secrets.token_urlsafe(12))
