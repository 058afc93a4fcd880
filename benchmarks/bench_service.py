"""Load on the search service over loopback HTTP: per-turn latency, concurrent sessions, a restart.

A real uvicorn process (``minterpr.serving``) serves a stored gallery of N images (100,000 by
default). The gallery is synthetic: identity centres drawn at random, each image its identity's
centre plus small Gaussian noise (renormalised), as the crops of one tracked person are near
duplicates; attribute probabilities random; 8 cameras, capture times one second apart. The
model is a trained run (``--run``) or, without one, the default architecture untrained (the
same computation per turn: the text encoder and the ranking do not care about training).

Phases:
1. ``latency``: one session, turns one after another (describe, then answers to the system's
   questions and feedback rejecting a shown image, an undo now and then).
2. ``load``: ``--sessions`` sessions at once, each ``--turns`` turns; when half of all turns are
   acknowledged the server is killed (SIGKILL) and started again. A client whose request failed
   waits for the server, reads its session's ``seq`` to learn whether the turn was committed,
   and carries on. At the end every session's stored ``seq`` must equal the turns acknowledged
   or found committed (nothing lost, nothing doubled), and its rankings after the restart must
   equal the last ones it was sent.

Printed: p50 / p95 per turn (ms) per phase, errors (non-2xx answers), requests that met the
restart, the restart's duration, and the checks. Run it under ``nice -n 10`` on a shared machine.

Usage:
    nice -n 10 python benchmarks/bench_service.py                      # 100k images, 20 sessions
    nice -n 10 python benchmarks/bench_service.py --images 10000 --sessions 5 --turns 4 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_turn_latency's tiling

from bench_service_server import Server, free_port  # noqa: E402

TURNS_PER_SESSION = 12  # turns of one session in the latency phase (the model reads at most 16)
DESCRIPTIONS = (
    "a man in a red jacket and blue jeans",
    "a young woman with long dark hair and a white top",
    "an older man in a grey suit carrying a briefcase",
    "a woman in a green coat with a backpack",
)


def make_run(folder: Path) -> Path:
    """The default architecture, untrained, as a run directory (when no --run is given)."""
    from minterpr.models import create_model, save_model
    from minterpr.training.config import load_config

    run = folder / "run"
    if not (run / "model.pt").is_file():
        save_model(create_model(load_config("synthetic").model), run / "model.pt", extra={"epoch": 0})
    return run


def build_store(folder: Path, run: Path, n: int, seed: int = 0, base: Path | None = None) -> Path:
    """A stored gallery of ``n`` images for ``run``'s model (reused when present): ``base``'s test gallery
    (a dataset folder, ``DIR/gallery_test.jsonl``) embedded and tiled with noise as in
    bench_turn_latency.py, or without ``base`` synthetic identity clusters."""
    from minterpr.language.ontology import ONTOLOGY
    from minterpr.errors import MinterprError
    from minterpr.index.gallery_index import GalleryIndex
    from minterpr.index.store.fused_store import build_fused, wants_fused
    from minterpr.index.store.gallery_store import open_gallery, save_gallery
    from minterpr.index.store.store_vectors import build_vector_index
    from minterpr.runtime.pipeline import load_pipeline
    from minterpr.types import GalleryImage

    pipe = load_pipeline(run)
    store = folder / f"store_{n}{'_tiled' if base else ''}"
    try:
        opened = open_gallery(store, expected_fingerprint=pipe.fingerprint).index
        if len(opened) == n and (opened.fused is not None or not wants_fused("auto", n)):
            return store
    except MinterprError:
        pass
    if base is not None:
        from bench_turn_latency import tile

        from minterpr.data.dataset import BuiltDataset

        embedded = pipe.index_images(BuiltDataset(base).gallery("test"), root=str(base), progress=False)
        index = tile(embedded, n, 0.05, seed)
        metadata = [{"time": f"2026-12-01T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}Z"} for i in range(n)]
        vectors = build_vector_index("exact", index, metadata, model_fingerprint=pipe.fingerprint)
        save_gallery(
            index,
            store,
            model_fingerprint=pipe.fingerprint,
            vector_index=vectors,
            metadata=metadata,
            fused_index=build_fused(index) if wants_fused("auto", n) else None,
        )  # as `index build` does
        return store
    rng = np.random.default_rng(seed)
    dim = pipe.model.embed_dim
    identities = max(1, n // 6)
    centres = rng.standard_normal((identities, dim), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    who = rng.integers(0, identities, size=n)
    embeddings = centres[who] + rng.standard_normal((n, dim), dtype=np.float32) * 0.03
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    probs = rng.random((n, len(ONTOLOGY.flat_labels())), dtype=np.float32)
    images = [GalleryImage(f"cam{i % 8}/{i:08d}.jpg", f"bench:{who[i]}", f"bench:cam{i % 8}") for i in range(n)]
    metadata = [{"time": f"2026-12-01T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}Z"} for i in range(n)]
    index = GalleryIndex(images, embeddings, attribute_probs=probs, root=str(folder / "crops"))
    vectors = build_vector_index("exact", index, metadata, model_fingerprint=pipe.fingerprint)
    save_gallery(
        index,
        store,
        model_fingerprint=pipe.fingerprint,
        vector_index=vectors,
        metadata=metadata,
        fused_index=build_fused(index) if wants_fused("auto", n) else None,
    )
    return store


def prepare_state(data: Path, run: Path, store: Path) -> tuple[str, int]:
    """A fresh service folder: one analyst with an API key, the gallery, one open case. Returns (key, case id)."""
    from minterpr.serving.service import build_services
    from minterpr.serving.settings import ServeSettings

    services = build_services(ServeSettings(data_dir=data))
    try:
        services.accounts.create_user("bench", secrets.token_urlsafe(16), "analyst")
        services.galleries.register("bench", store, run)
        principal = _principal(services)
        case = services.cases.open_case(
            principal, "load test", "benchmark of the service, no real footage", None, None, None
        )
        key = services.accounts.create_api_key(principal, "bench-clients")[1]
        return key, case.id
    finally:
        services.close()


def _principal(services: Any) -> Any:
    from minterpr.serving.accounts import Principal

    user = next(u for u in services.accounts.users() if u["username"] == "bench")
    return Principal(user["id"], "bench", "analyst", "api_key")


class Client:
    """One analyst's session, driven turn by turn; survives a server restart."""

    def __init__(self, url: str, key: str, case: int, seed: int) -> None:
        import httpx

        self.http = httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=120)
        self.rng = random.Random(seed)
        self.case = case
        self.sid = ""
        self.acked = 0  # turns the server acknowledged (or was found to have committed)
        self.view: dict[str, Any] = {}
        self.latencies: list[float] = []
        self.parts: list[dict[str, float]] = []  # the server's Server-Timing of each turn (ms by part)
        self.errors: list[str] = []
        self.interrupted = 0  # turns whose request met the restart (no answer)

    def start(self) -> None:
        self.view = self._retry(
            lambda: self.http.post("/api/sessions", json={"case_id": self.case, "gallery": "bench"})
        )
        self.sid = self.view["session_id"]

    def _retry(self, send: Any) -> dict:
        """The answer of ``send()``, retried while the server is away (restarting)."""
        import httpx

        while True:
            try:
                response = send()
            except httpx.TransportError:
                time.sleep(0.2)
                continue
            if response.status_code >= 400:
                self.errors.append(f"{response.status_code} {response.text[:200]}")
            return response.json()

    def turn(self) -> None:
        import httpx

        kind, body = self._next()
        t = time.perf_counter()
        try:
            response = self.http.post(f"/api/sessions/{self.sid}/{kind}", json=body)
        except httpx.TransportError:  # the server went away: was the turn committed?
            self.interrupted += 1
            state = self._wait_for_server()
            if state.get("seq") == self.acked + 1:
                self.acked += 1
                self.view = state
            return
        self.latencies.append(time.perf_counter() - t)
        timing = response.headers.get("server-timing", "")
        self.parts.append(
            {
                part.split(";dur=")[0].strip(): float(part.split(";dur=")[1])
                for part in timing.split(",")
                if ";dur=" in part
            }
        )
        if response.status_code >= 400:
            self.errors.append(f"{kind}: {response.status_code} {response.text[:200]}")
            return
        self.acked += 1
        self.view = response.json()

    def _wait_for_server(self) -> dict:
        return self._retry(lambda: self.http.get(f"/api/sessions/{self.sid}"))

    def _next(self) -> tuple[str, dict | None]:
        view, rng = self.view, self.rng
        if view.get("turns", 0) == 0:
            return "describe", {"text": rng.choice(DESCRIPTIONS)}
        if view["turns"] > 1 and rng.random() < 0.1:
            return "undo", None
        action = view.get("action")
        if action and action["kind"] == "question":
            return "answer", {"text": rng.choice(action["choices"])}
        if action and action["kind"] == "references":
            return "feedback", {"gallery_index": action["gallery_indices"][0], "text": "not him: no backpack"}
        return "describe", {"text": "he had a backpack"}


def percentiles(latencies: list[float], parts: list[dict[str, float]]) -> dict[str, float]:
    """p50 / p95 / max of the turns over HTTP (ms), and the p50 of the server's parts: the session's
    computing (the library), building the answer, the commit, and everything else (HTTP, auth, JSON)."""
    ms = np.asarray(latencies) * 1e3
    out = {
        "turns": len(ms),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p95_ms": round(float(np.percentile(ms, 95)), 1),
        "max_ms": round(float(ms.max()), 1),
    }
    known = [(total, p) for total, p in zip(ms, parts) if {"session", "view", "commit"} <= set(p)]
    if known:
        for name in ("session", "view", "commit"):
            out[f"{name}_p50_ms"] = round(float(np.median([p[name] for _, p in known])), 1)
        out["commit_p95_ms"] = round(float(np.percentile([p["commit"] for _, p in known], 95)), 1)
        out["outside_session_p50_ms"] = round(float(np.median([total - p["session"] for total, p in known])), 1)
        # the tail: the turns at or above the p95 latency, and the part of their time the commit took
        tail = [(total, p) for total, p in known if total >= out["p95_ms"]]
        out["tail_turns"] = len(tail)
        out["commit_share_of_tail"] = round(sum(p["commit"] for _, p in tail) / max(1e-9, sum(t for t, _ in tail)), 3)
        out["commit_share_p50"] = round(float(np.median([p["commit"] / max(total, 1e-9) for total, p in known])), 3)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--turns", type=int, default=8, help="turns per session in the load phase (at most 16)")
    parser.add_argument("--latency-turns", type=int, default=30, help="turns of the single-session phase")
    parser.add_argument("--run", help="a trained run (default: the default architecture, untrained)")
    parser.add_argument(
        "--base",
        metavar="DATA_DIR",
        help="tile the test gallery of this dataset folder (embedded by --run) instead of synthetic clusters",
    )
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "minterpr_bench_service"))
    parser.add_argument("--no-restart", action="store_true")
    parser.add_argument(
        "--writers",
        action="store_true",
        help="during the load phase, `minterpr users add` back to back (0.5 s apart) "
        "against the same state folder and an ingestion job (bench_service_writers.py)",
    )
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    run = Path(args.run) if args.run else make_run(work)
    t = time.perf_counter()
    store = build_store(work, run, args.images, base=Path(args.base) if args.base else None)
    result: dict[str, Any] = {
        "images": args.images,
        "sessions": args.sessions,
        "run": str(run),
        "base": args.base,
        "store_s": round(time.perf_counter() - t, 1),
    }
    data = Path(tempfile.mkdtemp(prefix="state_", dir=work))
    key, case = prepare_state(data, run, store)
    admin_key = None
    if args.writers:
        from bench_service_writers import add_admin

        admin_key = add_admin(data)
    server = Server(data, free_port(), work / "server.log", import_roots=(run.resolve().parent,))
    result["start_s"] = round(server.start(), 1)
    url = f"http://127.0.0.1:{server.port}"
    try:
        singles = []
        for k in range(0, args.latency_turns, TURNS_PER_SESSION):  # a session holds at most the model's 16 turns
            single = Client(url, key, case, seed=k)
            single.start()
            for _ in range(min(TURNS_PER_SESSION, args.latency_turns - k)):
                single.turn()
            singles.append(single)
        latencies = [x for s in singles for x in s.latencies][2:]  # the first turns warm up
        parts = [x for s in singles for x in s.parts][2:]
        errors = [e for s in singles for e in s.errors]
        result["latency"] = {**percentiles(latencies, parts), "errors": len(errors), "error_examples": errors[:3]}
        clients = [Client(url, key, case, seed=1 + k) for k in range(args.sessions)]
        for client in clients:
            client.start()
        half = args.sessions * args.turns // 2
        restart: dict[str, Any] = {}

        def restarter() -> None:
            while sum(c.acked for c in clients) < half:
                time.sleep(0.01)
            killed = time.perf_counter()
            server.kill()
            restart["start_s"] = round(server.start(), 1)
            restart["down_s"] = round(time.perf_counter() - killed, 1)

        def drive(client: Client) -> None:
            for _ in range(args.turns):
                client.turn()

        threads = [threading.Thread(target=drive, args=(c,)) for c in clients]
        if not args.no_restart:
            threads.append(threading.Thread(target=restarter))
        writers = None
        if admin_key is not None:
            from bench_service_writers import Writers

            writers = Writers(url, data, run.resolve(), admin_key)
            writers.start()
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        writer_report = writers.stop() if writers is not None else None
        latencies = [x for c in clients for x in c.latencies]
        lost, different = [], []
        for c in clients:
            stored = c.http.get(f"/api/sessions/{c.sid}").json()
            if stored["seq"] != c.acked:
                lost.append((c.sid, stored["seq"], c.acked))
            if [r["gallery_index"] for r in stored["results"]] != [r["gallery_index"] for r in c.view["results"]]:
                different.append(c.sid)
        result["load"] = {
            **percentiles(latencies, [x for c in clients for x in c.parts]),
            "wall_s": round(wall, 1),
            "turns_per_s": round(sum(c.acked for c in clients) / wall, 1),
            "errors": sum(len(c.errors) for c in clients),
            "error_examples": [e for c in clients for e in c.errors][:3],
            "interrupted_requests": sum(c.interrupted for c in clients),
            "restart": restart,
            "sessions_with_lost_or_doubled_turns": lost,
            "sessions_ranking_differently": different,
            **({"writers": writer_report} if writer_report is not None else {}),
        }
    finally:
        server.kill()
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
