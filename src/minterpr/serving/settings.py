"""The service's settings: one typed dataclass, a comment per field.

Example:
    >>> settings = ServeSettings(data_dir=Path("/srv/minterpr"))
    >>> settings.resolved_database_url()
    'sqlite:////srv/minterpr/minterpr.db'
    >>> settings.search_rate
    RateSpec(rate_per_s=5.0, burst=20)
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field
from pathlib import Path

from minterpr.errors import InputError
from minterpr.vlm.config import VLMConfig

MAX_TORCH_THREADS = 4096  # torch threads a process may ask for: 100,000 crashed torch (segfault) at its first matmul

MIB = 1024 * 1024
# the bounds of each numeric setting, both inclusive (None = unbounded above); a setting outside them is refused
# at start, naming it: a `nan` login lifetime made every login answer 500, a zero request size refused everything
BOUNDS: dict[str, tuple[float, float | None]] = {
    "login_ttl_hours": (1 / 60, 24 * 366),  # a minute to a year
    "max_text_chars": (1, 1_000_000),
    "max_upload_bytes": (1, 1024 * MIB),
    "max_image_pixels": (1, 1_000_000_000),
    "max_request_bytes": (1, 4096 * MIB),
    "max_video_bytes": (1, 1024 * 1024 * MIB),
    "results_per_turn": (1, 100_000),  # (a request's number is capped by max_results)
    "max_results": (1, 100_000),
    "max_live_sessions": (1, 10_000_000),
    "retention_days": (1, 36_500),  # what POST /api/admin/retention accepts
    "thumbnail_height": (1, 4096),
    "torch_threads": (1, MAX_TORCH_THREADS),
    "vlm_caption_weight": (0.0, 1.0),
    "vlm_caption_max_calls": (1, None),
    "vlm_caption_max_tokens": (1, None),
}


@dataclass(frozen=True)
class RateSpec:
    """A token bucket: ``burst`` requests at once, refilled at ``rate_per_s`` per second."""

    rate_per_s: float  # tokens added per second
    burst: int  # bucket size: requests allowed back to back

    def __post_init__(self) -> None:
        if not self.rate_per_s > 0 or self.burst < 1:
            raise InputError(f"rate limit needs rate_per_s > 0 and burst >= 1, got {self.rate_per_s}, {self.burst}")


@dataclass(frozen=True)
class ServeSettings:
    """Everything ``minterpr serve`` can be told; ``create_app(settings)`` reads nothing else."""

    data_dir: Path  # the service's state: database file, uploads/, galleries/ (stores the service built)
    database_url: str | None = None  # SQLAlchemy URL; None = SQLite (WAL) at data_dir/minterpr.db
    cookie_secure: bool = False  # set the Secure flag on cookies (serve behind TLS)
    login_ttl_hours: float = 12.0  # a login (cookie) expires this long after it was made
    max_text_chars: int = 1000  # longest description / answer / feedback / title accepted
    max_upload_bytes: int = 5 * MIB  # largest example image accepted
    max_image_pixels: int = 40_000_000  # largest decoded example image (width x height)
    max_request_bytes: int = 8 * MIB  # largest request body of any kind, a video upload's excepted
    max_video_bytes: int = 2048 * MIB  # largest video uploaded from the ingestion page (streamed to disk)
    login_rate: RateSpec = field(default_factory=lambda: RateSpec(0.2, 5))  # per account (username, known or not)
    login_client_rate: RateSpec = field(default_factory=lambda: RateSpec(0.5, 10))  # per client address, any username
    search_rate: RateSpec = field(default_factory=lambda: RateSpec(5.0, 20))  # turns per user
    upload_rate: RateSpec = field(default_factory=lambda: RateSpec(0.5, 12))  # example uploads per user (disk)
    results_per_turn: int = 10  # results a turn returns unless the request asks for another number
    max_results: int = 100  # most results one response may carry
    max_live_sessions: int = 256  # sessions kept computed in memory; older ones are replayed from their events
    retention_days: int | None = None  # `minterpr serve purge` / POST /api/admin/retention default; None = keep
    thumbnail_height: int = 256  # height of the thumbnails the image route returns
    torch_threads: int | None = None  # torch intra-op threads in the server process; None = leave as is
    device: str = "cpu"  # torch device the galleries' models run on (`minterpr serve --device`)
    # the appearance model beside each gallery's run (`serve --appearance`): "auto" = the shipped one beside a
    # shipped attribute model, none beside other runs (the demo's); "shipped", a path, or "none"
    appearance: str = "auto"
    demo_gallery: str | None = None  # gallery a page offers first (set by `minterpr serve --demo`)
    vlm: VLMConfig | None = None  # a vision-language model for every session (`serve --vlm-url`); None = none
    # MTG: search each gallery with the captions its store holds (STORE/vlm_captions.jsonl, `minterpr vlm
    # caption --index STORE`; `serve --vlm-captions`); a store without them is searched as before
    vlm_captions: bool = False
    vlm_caption_weight: float = 0.5  # weight of the captions' evidence in each captioned slot's probabilities
    # MTG as a service job (POST /api/ingest/caption, the ingest page): the `vlm` endpoint captions a registered
    # gallery's crops into its store; one job may spend at most this many calls and tokens (5 calls a crop)
    vlm_caption_max_calls: int = 20_000
    vlm_caption_max_tokens: int = 20_000_000
    # folders (besides data_dir) the API may read ingestion sources, gallery stores and runs from;
    # the command line may register any path, a request only these
    import_roots: tuple[Path, ...] = ()
    # proxies (addresses or networks, "*" = any) whose X-Forwarded-For names the client; () = none, so a
    # client cannot pick its own address (the login limit is per address)
    trusted_proxies: tuple[str, ...] = ()
    # a bearer token that may read /metrics (Prometheus' `authorization` setting) besides admins; None = admins only
    metrics_token: str | None = None
    upload_dir: Path | None = None  # where uploaded example images are kept; None = data_dir/uploads

    def __post_init__(self) -> None:
        for name, (low, high) in BOUNDS.items():
            value = getattr(self, name)
            if value is None and name in ("retention_days", "torch_threads"):
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < low
                or (high is not None and value > high)
            ):
                within = f"{low:g}..{high:g}" if high is not None else f">= {low:g}"
                raise InputError(f"{name} must be a number within {within}, got {value!r}")
        for proxy in self.trusted_proxies:
            if proxy != "*":
                try:
                    ipaddress.ip_network(proxy, strict=False)
                except ValueError:
                    raise InputError(f"trusted_proxies: {proxy!r} is not an IP address or network (or *)") from None

    def resolved_database_url(self) -> str:
        """The SQLAlchemy URL in use."""
        return self.database_url or f"sqlite:///{Path(self.data_dir).absolute() / 'minterpr.db'}"

    @property
    def uploads_dir(self) -> Path:
        """Example images uploaded into sessions (re-encoded PNG, named by content hash); absolute, so a
        relative ``data_dir`` (or ``upload_dir``) is not read under a gallery's image root."""
        return (
            Path(self.upload_dir).absolute()
            if self.upload_dir is not None
            else Path(self.data_dir).absolute() / "uploads"
        )

    @property
    def incoming_dir(self) -> Path:
        """Where ingestion sources may be put for the API to find (besides ``import_roots``)."""
        return Path(self.data_dir) / "incoming"

    @property
    def video_uploads_dir(self) -> Path:
        """Videos uploaded from the ingestion page (inside ``incoming_dir``, so a job may name them; under
        retention like the sessions' example images)."""
        return self.incoming_dir / "uploads"

    def importable(self, path: str | Path) -> bool:
        """Whether a request may name ``path`` (inside data_dir or one of import_roots, links resolved)."""
        target = Path(path).expanduser().resolve()
        return any(
            target == root or root in target.parents
            for root in (Path(r).expanduser().resolve() for r in (self.data_dir, *self.import_roots))
        )

    def is_state(self, path: str | Path) -> bool:
        """Whether ``path`` overlaps the service's own state — ``data_dir`` (its ``incoming`` folder
        excepted) contains it or lies inside it, or it is the SQLite database or one of its side
        files — so that ingestion never reads the database or the credentials file as a source."""
        target = Path(path).expanduser().resolve()
        data = Path(self.data_dir).expanduser().resolve()
        incoming = Path(self.incoming_dir).expanduser().resolve()
        if target == incoming or incoming in target.parents:
            return False
        if target == data or data in target.parents or target in data.parents:
            return True
        url = self.resolved_database_url()
        if url.startswith("sqlite:///"):
            database = Path(url[len("sqlite:///") :]).expanduser().resolve()
            return target.parent == database.parent and target.name.startswith(database.name)
        return False

    @property
    def galleries_dir(self) -> Path:
        """Gallery stores the service builds itself (ingestion)."""
        return Path(self.data_dir) / "galleries"
