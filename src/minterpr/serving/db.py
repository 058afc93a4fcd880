"""The service's tables (SQLAlchemy 2.x): users, keys, logins, galleries, cases, sessions and their
event log, the audit chain, ingestion jobs. SQLite in WAL mode by default, PostgreSQL by URL.

Times are UNIX seconds (float) so SQLite and PostgreSQL store them alike; the audit chain keeps
its own ISO strings (they are hashed). The tables are made by the schema's revisions
(:mod:`minterpr.serving.schema`), not from these classes. The audit table refuses UPDATE and DELETE in the
database itself (a trigger), and a session's events are unique by (session, seq), so two
writers racing on one session cannot both commit the same turn.

Example:
    >>> db = Database("sqlite://")
    >>> with db.transaction() as tx:
    ...     tx.add(User(username="ana", password_hash="x", role="analyst", created=0.0))
    >>> with db.transaction() as tx:
    ...     tx.scalar(select(User.role).where(User.username == "ana"))
    'analyst'
"""

from __future__ import annotations

import random
import sqlite3
import time
from contextlib import contextmanager
from typing import Any, Iterator

from sqlalchemy import (
    JSON,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    select,
    text,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from sqlalchemy.pool import StaticPool

__all__ = [
    "ApiKey",
    "AuditRow",
    "Base",
    "Case",
    "Database",
    "GalleryRow",
    "IngestJob",
    "Login",
    "SearchSession",
    "SessionEvent",
    "User",
    "now",
    "select",
]


def now() -> float:
    """The current time as stored (UNIX seconds)."""
    return time.time()


class Base(DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    password_hash: Mapped[str] = mapped_column(String(256))  # Argon2id PHC string, or an older scrypt$... (security.py)
    role: Mapped[str] = mapped_column(String(16))
    created: Mapped[float] = mapped_column(Float)
    disabled: Mapped[bool] = mapped_column(default=False)


class ApiKey(Base):
    __tablename__ = "api_keys"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    name: Mapped[str] = mapped_column(String(100))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)  # SHA-256 of the key (keys are 256-bit random)
    prefix: Mapped[str] = mapped_column(String(16))  # first characters, to recognise a key in a list
    created: Mapped[float] = mapped_column(Float)
    revoked: Mapped[bool] = mapped_column(default=False)


class Login(Base):
    __tablename__ = "logins"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)  # SHA-256 of the cookie's token
    csrf_token: Mapped[str] = mapped_column(String(64))  # the double-submit token of this login
    created: Mapped[float] = mapped_column(Float)
    expires: Mapped[float] = mapped_column(Float)
    revoked: Mapped[bool] = mapped_column(default=False)


class GalleryRow(Base):
    __tablename__ = "galleries"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    directory: Mapped[str] = mapped_column(Text)  # the gallery store's folder
    run_dir: Mapped[str] = mapped_column(Text)  # the trained run that built it (embeds the queries)
    created: Mapped[float] = mapped_column(Float)
    version: Mapped[int] = mapped_column(Integer, default=1)  # bumped when the store is rewritten (retention)
    managed: Mapped[bool] = mapped_column(default=False)  # the service owns the images (retention may delete them)


class Case(Base):
    __tablename__ = "cases"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    title: Mapped[str] = mapped_column(Text)
    purpose: Mapped[str] = mapped_column(Text)
    cameras: Mapped[Any] = mapped_column(JSON, nullable=True)  # list of camera ids, None = every camera
    start: Mapped[float | None] = mapped_column(Float, nullable=True)  # time scope, None = unbounded
    end: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_by: Mapped[int] = mapped_column(ForeignKey("users.id"))
    created: Mapped[float] = mapped_column(Float)
    status: Mapped[str] = mapped_column(String(16), default="open")  # open | closed


class SearchSession(Base):
    __tablename__ = "sessions"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    case_id: Mapped[int] = mapped_column(ForeignKey("cases.id"), index=True)
    gallery_id: Mapped[int] = mapped_column(ForeignKey("galleries.id"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    created: Mapped[float] = mapped_column(Float)
    updated: Mapped[float] = mapped_column(Float)
    filters: Mapped[Any] = mapped_column(JSON)  # {"cameras": [...] | None, "start": t | None, "end": t | None}
    options: Mapped[Any] = mapped_column(JSON)  # Session keywords (seed, policies) fixed at start
    seq: Mapped[int] = mapped_column(Integer, default=0)  # events committed


class SessionEvent(Base):
    __tablename__ = "session_events"
    __table_args__ = (UniqueConstraint("session_id", "seq"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), index=True)
    seq: Mapped[int] = mapped_column(Integer)  # 1, 2, ... within the session
    time: Mapped[float] = mapped_column(Float)
    user_id: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))  # describe answer feedback example undo confirm export
    payload: Mapped[Any] = mapped_column(JSON)


class AuditRow(Base):
    __tablename__ = "audit_log"
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    time: Mapped[str] = mapped_column(String(40))
    user: Mapped[str | None] = mapped_column(String(64), nullable=True)
    action: Mapped[str] = mapped_column(String(32))
    case_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    details: Mapped[str] = mapped_column(Text)  # canonical JSON (hashed as written)
    request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)  # X-Request-ID of the writer (0003)
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))


class IngestJob(Base):
    __tablename__ = "ingest_jobs"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    gallery: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(Text)
    options: Mapped[Any] = mapped_column(JSON)
    user_id: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))  # queued running done failed cancelled
    progress: Mapped[Any] = mapped_column(JSON)
    message: Mapped[str] = mapped_column(Text, default="")
    created: Mapped[float] = mapped_column(Float)
    updated: Mapped[float] = mapped_column(Float)


BUSY_TIMEOUT_MS = 30_000  # how long an SQLite connection waits for another writer's lock


class Database:
    """An engine, a session factory and the schema (created when missing).

    :meth:`transaction` reads (and may write); :meth:`write` is for transactions that append to
    the audit chain or a session's events: it takes the database's write lock when it starts
    (SQLite ``BEGIN IMMEDIATE``, a PostgreSQL transaction-level advisory lock), so writers —
    threads or processes — follow one another and each sees the chain head the last one left.

    The schema is versioned (:mod:`minterpr.serving.schema`): an empty database is created at the
    current revision, an older one refused (:class:`~minterpr.serving.schema.SchemaError`)
    unless ``upgrade``."""

    def __init__(self, url: str, *, upgrade: bool = False) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        self.engine, self.write_engine = engines(url)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.write_sessions = sessionmaker(self.write_engine, expire_on_commit=False)
        from minterpr.serving import schema

        if upgrade or schema.revision(self.engine) is None:  # a new database is made at the current revision
            schema.upgrade(self.write_engine)
        schema.check(self.engine, self.engine.url.render_as_string(hide_password=True))

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """A session committed on success, rolled back on any error."""
        with self.sessions() as session, session.begin():
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A transaction holding the write lock from its start (see the class doc)."""
        with self.write_sessions() as session, session.begin():
            if self.write_engine.dialect.name == "postgresql":
                session.execute(text("SELECT pg_advisory_xact_lock(72150611)"))
            yield session

    def dispose(self) -> None:
        self.engine.dispose()
        if self.write_engine is not self.engine:
            self.write_engine.dispose()


def engines(url: str) -> tuple[Engine, Engine]:
    """(reads, writes): for SQLite two engines — transactions begin deferred / ``BEGIN IMMEDIATE``
    (the write lock from the start), the file put in WAL mode once — for other databases one."""
    if not url.startswith("sqlite"):
        engine = create_engine(url)
        return engine, engine
    kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000}}
    if url in ("sqlite://", "sqlite:///:memory:"):  # one in-memory database shared by every thread
        engine = create_engine(url, poolclass=StaticPool, **kwargs)
        _sqlite_transactions(engine, "BEGIN")
        return engine, engine
    engine, write_engine = create_engine(url, **kwargs), create_engine(url, **kwargs)
    _sqlite_transactions(engine, "BEGIN")
    _sqlite_transactions(write_engine, "BEGIN IMMEDIATE")
    _sqlite_wal(engine)
    return engine, write_engine


def _sqlite_transactions(engine: Engine, begin: str) -> None:
    """pysqlite left to itself begins transactions late and never for reads; SQLAlchemy's recipe:
    autocommit at the driver, and ``begin`` emitted when SQLAlchemy begins."""

    @event.listens_for(engine, "connect")
    def connect(connection: Any, _record: Any) -> None:
        connection.isolation_level = None
        _sqlite_pragmas(connection)

    @event.listens_for(engine, "begin")
    def start(conn: Any) -> None:
        if begin == "BEGIN IMMEDIATE":
            begin_immediate(conn.connection.driver_connection)
        else:
            conn.exec_driver_sql(begin)


def begin_immediate(connection: Any, timeout_s: float = BUSY_TIMEOUT_MS / 1000, pause_s: float = 0.001) -> None:
    """``BEGIN IMMEDIATE`` on a pysqlite connection, retried every ~``pause_s`` while another
    writer holds the lock, up to ``timeout_s``. SQLite's own busy handler sleeps 1, 2, 5, 10 ...
    up to 100 ms between tries, so under 20 writers a lock freed after 3 ms was taken only
    tens of ms later (docs/benchmarks.md, "p95 turn latency with a CLI writer ..."); the
    handler is off for the BEGIN only, every later statement keeps it.

    Example:
        >>> import sqlite3
        >>> c = sqlite3.connect(":memory:", isolation_level=None)
        >>> begin_immediate(c); c.in_transaction
        True
    """
    deadline = time.monotonic() + timeout_s
    connection.execute("PRAGMA busy_timeout=0")
    try:
        while True:
            try:
                connection.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) and "busy" not in str(err):
                    raise
                if time.monotonic() >= deadline:
                    raise
            time.sleep(pause_s * (0.5 + random.random()))  # jitter: writers do not retry in step
    finally:
        connection.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")


def _sqlite_pragmas(connection: Any) -> None:
    """What each connection needs. Not the journal mode: WAL is a property of the file, set once
    (:func:`_sqlite_wal`); asking for it on every connection made connections fail while another
    process was writing."""
    cursor = connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")  # first: the pragmas below may wait for a lock
    cursor.execute("PRAGMA synchronous=NORMAL")  # in WAL: a commit survives a killed process (not a power cut)
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _sqlite_wal(engine: Engine, attempts: int = 50, pause_s: float = 0.2) -> None:
    """Put the database file in WAL mode (readers never wait for the writer) unless it is already:
    switching needs the file to itself, so a locked or busy file is retried for ~10 s."""
    import sqlite3

    for attempt in range(attempts):
        connection = None
        try:
            connection = engine.raw_connection()  # the driver's, in autocommit: no transaction around the pragma
            cursor = connection.cursor()
            if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                mode = cursor.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if mode != "wal":  # e.g. a file system without shared memory: say so rather than run slower
                    raise sqlite3.OperationalError(f"{engine.url.database}: the journal mode stays {mode!r}, not WAL")
            cursor.close()
            return
        except sqlite3.OperationalError as err:
            if attempt == attempts - 1 or "stays" in str(err):
                raise
            time.sleep(pause_s)
        finally:
            if connection is not None:
                connection.close()
