"""The thread-safety probes of ``probe_bad_inputs.py`` (registered in ``probe_api.PROBES`` on import):
encoders and sessions used from several threads at once must give what one thread gives."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from probe_api import Ctx, ProbeUnsupported, Verdict, judge, probe


# ----------------------------------------------------------------------------- threads
def _texts(n: int, tag: str) -> list[str]:
    colours = ["red", "blue", "green", "black", "white", "grey", "yellow", "pink"]
    items = ["jacket", "shirt", "skirt", "jeans", "shoes", "hat", "backpack", "bag"]
    return [f"{tag} a person in a {colours[k % 8]} {items[(k // 8) % 8]} number {k}" for k in range(n)]


@probe
def threads_encode(ctx: Ctx, arg) -> Verdict:
    """arg = (text cache size, threads, texts per thread): threads share one NeuralBackend; every
    query must equal the single-threaded one."""
    cache, n_threads, n_texts = arg
    from minterpr.runtime.neural_backend import NeuralBackend
    from minterpr.types import DescriptionTurn, QATurn

    try:
        shared = NeuralBackend(ctx.pipe.model, text_cache_size=cache)
    except TypeError as exc:
        raise ProbeUnsupported(f"NeuralBackend(text_cache_size=...): {exc}") from exc
    reference = NeuralBackend(ctx.pipe.model)
    jobs = [
        [[DescriptionTurn(t), QATurn("Shoes?", t[-9:])] for t in _texts(n_texts, f"t{k}")] for k in range(n_threads)
    ]
    expected = [[reference.encode_turns(turns, ctx.gallery) for turns in job] for job in jobs]
    results: list[list[np.ndarray]] = [[] for _ in jobs]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for turns in jobs[k]:
                results[k].append(shared.encode_turns(turns, ctx.gallery))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    import sys

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show up in a short run
    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    if errors:
        return judge(errors[0])
    for got, want in zip(results, expected):
        for a, b in zip(got, want):
            if not np.allclose(a, b, atol=1e-5):
                return "silent", "a query computed on a shared backend differs from the single-threaded one"
    return "ok", ""


@probe
def threads_sessions(ctx: Ctx, arg) -> Verdict:
    """arg = threads: one session per thread on the same pipeline; rankings equal sequential ones."""
    n_threads = arg
    script = [
        ("describe", "a woman in a red top"),
        ("describe", "she wore white shoes"),
        ("feedback", 0),
        ("describe", "and a black backpack"),
    ]

    def run(session) -> list[tuple[int, ...]]:
        out = []
        for move, value in script:
            if move == "feedback":
                step = session.feedback(int(session.step.ranking[value]), "no, not her")
            else:
                step = session.describe(value)
            out.append(tuple(int(i) for i in step.ranking))
        return out

    expected = run(ctx.session(seed=1))
    results: list[Any] = [None] * n_threads
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for _ in range(5):
                results[k] = run(ctx.session(seed=1))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        return judge(errors[0])
    if any(r != expected for r in results):
        return "silent", "a session run in a thread ranks differently from the same session run alone"
    return "ok", ""
