"""Turn latency a vision-language model adds to a session: a scripted local endpoint, a failing one.

A gallery of ``--gallery`` images with seeded random attributes (the attribute backend; each image
a small file, sent to the model as it would be) is searched by ``--sessions`` simulated users
(the ``oracle`` simulator: describe + ``--rounds`` turns). Each session runs three times over the
same turns:

1. without a model (``vlm=None``): the reference turn times;
2. with every use on (reading, asking, anchor, rerank) against :class:`~minterpr.vlm.testing.ScriptedServer`
   on loopback, in a process of its own (as a real server is), which answers each call after
   ``--delay-ms`` with a valid minimal answer (no facts, nothing seen, even odds: the rankings stay
   those of run 1, so the turns are the same);
3. against a failing endpoint: one that answers after 30 s (past the turn's ``--deadline-ms``),
   and a closed port (connection refused, retried with backoff).

The overhead is measured three ways:

- ``overhead``: ``t(model) - t(no model) - server time``, the server time being that of every request
  the client sent, posted again byte for byte with plain ``httpx`` to the same server, back to back
  (on a loaded machine this replay is faster than the same requests spaced out by a session's
  work, so the figure carries some scheduling noise);
- ``session side``: ``t(model) - t(no model) - the client's own call times`` (the hook's work: the
  anchor and rerank recomputations, reading the images, the records);
- ``client per call``: ``VLMClient.ask`` against a plain ``httpx`` post of the same body, interleaved,
  ``--probe`` times (body, base64, schema validation, cache key and records);
- ``CPU added``: the CPU time the turn's thread spends beyond the plain turn (the session's and the
  client's work, httpx's included; not the waits for the server, which scheduling on a loaded
  machine stretches): what the model path costs the machine it runs on;
- ``model wait max``: the worst turn's time inside the client's calls (their records' latencies, what
  the audit log says the turn waited), against the deadline for the failing endpoints.

Targets: <= 5 ms per turn with the scripted endpoint; a failing endpoint adds at most its deadline
once per turn. The clients borrow the process's connection pool, as they do without a transport.

Usage:
    python benchmarks/bench_vlm_overhead.py
    python benchmarks/bench_vlm_overhead.py --gallery 2000 --sessions 10 --delay-ms 50 --json out.json
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import random
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from minterpr.language.ontology import ONTOLOGY
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.interaction.session import Session
from minterpr.interaction.simulators import SIMULATORS
from minterpr.types import GalleryImage
from minterpr.vlm.assist import VLMAssistant
from minterpr.vlm.config import VLMConfig
from minterpr.vlm.testing import ScriptedServer, status, valid_answer

USES = ("reading", "asking", "anchor", "rerank")


def gallery(folder: Path, size: int, seed: int) -> list[GalleryImage]:
    rng = random.Random(seed)
    images = []
    for i in range(size):
        attributes = {
            slot.name: (rng.choice(slot.value_names),)
            for slot in ONTOLOGY.slots
            if not any(v.excludes_others for v in slot.values)
        }
        path = f"{i:05d}.jpg"
        (folder / path).write_bytes(b"\xff\xd8" + rng.randbytes(3000))  # a small JPEG's worth of bytes
        images.append(GalleryImage(path, f"bench:{i // 2}", attributes=attributes))
    return images


class Recording:
    """The transport every client borrows (the process's pool, as without a transport), keeping every
    request body it sends (for the raw replay)."""

    def __init__(self, bodies: list[bytes]) -> None:
        from minterpr.vlm.transport import shared_transport

        self._inner = shared_transport(False)
        self.bodies = bodies

    def handle_request(self, request: Any) -> Any:
        self.bodies.append(request.read())
        return self._inner.handle_request(request)

    def close(self) -> None:
        pass  # the pool is the process's


def run_sessions(
    backend: Any,
    index: Any,
    images: list[GalleryImage],
    args: argparse.Namespace,
    config: VLMConfig | None,
    bodies: list[bytes] | None = None,
) -> list[dict[str, Any]]:
    """Per turn: {"session", "turn", "seconds", "calls", "requests", "top"}; request bodies into ``bodies``."""
    from minterpr.vlm.client import VLMClient

    rows = []
    for s in range(args.sessions):
        transport = Recording(bodies) if bodies is not None else None
        vlm = VLMAssistant(config, VLMClient(config, transport=transport)) if config is not None else None
        session = Session(backend, index, vlm=vlm, seed=s)
        user = SIMULATORS.create("oracle").user(images[(s * 37) % len(images)], index, query=s, seed=s)
        action = None
        for t in range(args.rounds + 1):
            turn = user.respond(action) if t else None
            if t and turn is None:
                break
            start, cpu = time.perf_counter(), time.thread_time()
            step = session.add(turn) if t else session.describe(user.describe())
            seconds, cpu = time.perf_counter() - start, time.thread_time() - cpu
            records = vlm.turn_usage()["records"] if vlm is not None else []
            rows.append(
                {
                    "session": s,
                    "turn": t,
                    "seconds": seconds,
                    "cpu": cpu,
                    "calls": sum(r["attempts"] > 0 for r in records),
                    "requests": sum(r["attempts"] for r in records),
                    "top": int(step.ranking[0]),
                    "client": sum(r["latency_s"] for r in records),
                }
            )
            action = step.action
        if vlm is not None:
            vlm.close()
    return rows


def server_times(url: str, bodies: list[bytes], rows: list[dict[str, Any]]) -> None:
    """Each row's ``server``: the seconds plain httpx posts of its requests (as sent, in order) take."""
    import httpx

    times = []
    with httpx.Client(verify=False) as client:
        for body in bodies:
            start = time.perf_counter()
            client.post(
                url + "/chat/completions", content=body, headers={"Content-Type": "application/json"}
            ).raise_for_status()
            times.append(time.perf_counter() - start)
    k = 0
    for row in rows:
        row["server"] = sum(times[k : k + row["requests"]])
        k += row["requests"]


def _serve(delay_s: float, urls: Any, stop: Any) -> None:
    """The scripted server in a child process, until ``stop`` is set."""
    with ScriptedServer([functools.partial(valid_answer, delay_s=delay_s)], repeat=True) as server:
        urls.put(server.url)
        stop.wait()


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"  # nothing listens once it is closed


def compare(plain: list[dict[str, Any]], other: list[dict[str, Any]]) -> dict[str, Any]:
    extra = [o["seconds"] - p["seconds"] - o.get("server", 0.0) for p, o in zip(plain, other)]
    side = [o["seconds"] - p["seconds"] - o["client"] for p, o in zip(plain, other)]
    added = [o["seconds"] - p["seconds"] for p, o in zip(plain, other)]
    return {
        "turns": len(other),
        "calls_per_turn": round(statistics.mean(o["calls"] for o in other), 3),
        "vlm_wait_ms_max": round(1000 * max(o["client"] for o in other), 3),  # the calls' own time, worst turn
        # CPU the turn's thread spent beyond the plain turn: the model path's own work, httpx included,
        # without the waits for the server (which a loaded machine's scheduling stretches)
        "cpu_added_ms_p50": round(1000 * statistics.median(o["cpu"] - p["cpu"] for p, o in zip(plain, other)), 3),
        "cpu_added_ms_mean": round(1000 * statistics.mean(o["cpu"] - p["cpu"] for p, o in zip(plain, other)), 3),
        "same_top": all(p["top"] == o["top"] for p, o in zip(plain, other)),
        "added_ms_p50": round(1000 * statistics.median(added), 3),
        "added_ms_max": round(1000 * max(added), 3),
        "overhead_ms_p50": round(1000 * statistics.median(extra), 3),
        "overhead_ms_mean": round(1000 * statistics.mean(extra), 3),
        "session_side_ms_p50": round(1000 * statistics.median(side), 3),
        "session_side_ms_mean": round(1000 * statistics.mean(side), 3),
    }


def client_per_call(url: str, image: bytes, repeats: int) -> dict[str, float]:
    """Median ms of VLMClient.ask and of a plain httpx post of the same body, interleaved."""
    import httpx

    from minterpr.vlm.client import VLMClient
    from minterpr.vlm.schema import scores_schema

    bodies: list[bytes] = []
    asked, posted, asked_cpu, posted_cpu = [], [], [], []
    images = [image[:-1] + bytes([k]) for k in range(5)]  # five different candidates, as a rerank sends
    with VLMClient(VLMConfig(url, "m"), transport=Recording(bodies)) as client, httpx.Client(verify=False) as plain:
        for k in range(repeats):
            start, cpu = time.perf_counter(), time.thread_time()
            client.ask("rerank", f"probe {k}", images=images, schema=scores_schema(5))
            asked.append(time.perf_counter() - start)
            asked_cpu.append(time.thread_time() - cpu)
            start, cpu = time.perf_counter(), time.thread_time()
            plain.post(url + "/chat/completions", content=bodies[-1], headers={"Content-Type": "application/json"})
            posted.append(time.perf_counter() - start)
            posted_cpu.append(time.thread_time() - cpu)
    return {
        "client_ms_p50": round(1000 * statistics.median(asked), 3),
        "httpx_ms_p50": round(1000 * statistics.median(posted), 3),
        "client_overhead_ms_p50": round(1000 * statistics.median(a - b for a, b in zip(asked, posted)), 3),
        "client_cpu_ms_p50": round(1000 * statistics.median(asked_cpu), 3),
        "httpx_cpu_ms_p50": round(1000 * statistics.median(posted_cpu), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gallery", type=int, default=500, help="gallery images (default 500)")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--delay-ms", type=float, default=20.0, help="the scripted server's answer delay")
    parser.add_argument("--deadline-ms", type=float, default=250.0, help="the turn deadline of the failing runs")
    parser.add_argument("--probe", type=int, default=40, help="interleaved calls of the client-per-call probe")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        images = gallery(Path(folder), args.gallery, args.seed)
        backend = AttributeBackend()
        index = backend.index_images(images, folder)
        run_sessions(backend, index, images, args, None)  # warm-up (caches, imports)
        plain = run_sessions(backend, index, images, args, None)
        delay = args.delay_ms / 1000
        deadline = args.deadline_ms / 1000
        figures: dict[str, Any] = {
            "gallery": args.gallery,
            "sessions": args.sessions,
            "rounds": args.rounds,
            "delay_ms": args.delay_ms,
            "deadline_ms": args.deadline_ms,
        }
        urls, stop = multiprocessing.Queue(), multiprocessing.Event()
        child = multiprocessing.Process(target=_serve, args=(delay, urls, stop), daemon=True)
        child.start()
        try:
            url = urls.get(timeout=30)
            run_sessions(backend, index, images, args, VLMConfig(url, "m", uses=USES), [])  # warm-up (imports)
            bodies: list[bytes] = []
            scripted = run_sessions(backend, index, images, args, VLMConfig(url, "m", uses=USES), bodies)
            server_times(url, bodies, scripted)
            figures["client_per_call"] = client_per_call(url, (Path(folder) / images[0].path).read_bytes(), args.probe)
        finally:
            stop.set()
            child.join(timeout=10)
        calls = sum(r["requests"] for r in scripted)
        figures["server_ms"] = round(1000 * sum(r["server"] for r in scripted) / max(calls, 1), 3)
        figures["scripted"] = compare(plain, scripted)
        with ScriptedServer([status(200, delay_s=30.0)], repeat=True) as server:
            slow = run_sessions(
                backend, index, images, args, VLMConfig(server.url, "m", uses=USES, turn_deadline_s=deadline)
            )
        figures["past_deadline"] = compare(plain, slow)
        refused = run_sessions(
            backend,
            index,
            images,
            args,
            VLMConfig(closed_port(), "m", uses=USES, turn_deadline_s=deadline, backoff_s=0.05),
        )
        figures["refused"] = compare(plain, refused)
    figures["plain_turn_ms_p50"] = round(1000 * statistics.median(r["seconds"] for r in plain), 3)
    print(
        f"gallery {args.gallery}, {args.sessions} sessions x {args.rounds + 1} turns; plain turn p50 "
        f"{figures['plain_turn_ms_p50']} ms; server answer {figures['server_ms']} ms per request "
        f"(delay {args.delay_ms} ms)"
    )
    for name in ("scripted", "past_deadline", "refused"):
        f = figures[name]
        print(
            f"{name:14s} calls/turn {f['calls_per_turn']:5.2f}  added p50 {f['added_ms_p50']:8.2f} ms  "
            f"max {f['added_ms_max']:8.2f} ms  overhead beyond the server p50 {f['overhead_ms_p50']:7.2f} ms "
            f"mean {f['overhead_ms_mean']:7.2f} ms  session side p50 {f['session_side_ms_p50']:6.2f} ms  "
            f"model wait max {f['vlm_wait_ms_max']:7.2f} ms  CPU added p50 {f['cpu_added_ms_p50']:6.2f} ms "
            f"mean {f['cpu_added_ms_mean']:6.2f} ms  same top-1: {f['same_top']}"
        )
    probe = figures["client_per_call"]
    print(
        f"client per call: VLMClient.ask p50 {probe['client_ms_p50']} ms, plain httpx p50 {probe['httpx_ms_p50']} ms, "
        f"difference p50 {probe['client_overhead_ms_p50']} ms; CPU {probe['client_cpu_ms_p50']} ms against "
        f"{probe['httpx_cpu_ms_p50']} ms"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
