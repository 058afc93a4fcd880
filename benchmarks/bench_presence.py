"""'Probably not in this footage': how often the presence estimate flags searches whose target is absent.

Simulated searches on a split of the synthetic world: an oracle user (ground truth, recognises the
target) describes a target, then answers the system's questions and rules out the references shown,
for up to ``--turns`` turns after the description. Each target is searched twice: over the whole
gallery (present) and over the gallery with every image of its identity removed (absent). After
every turn the session's presence probability (:func:`minterpr.interaction.presence.presence_probability`
of the match probabilities of the images ruled out, as the page showed them) is compared with the
threshold. A present search stops when the user confirms the target. The match is shown at the
run's fitted temperature (``minterpr calibrate-match``, on val) when it has one; ``--match-temperature``
overrides it (``--match-temperature 0.02``: the uncalibrated default).

Targets: >= 80 % of absent-target searches flagged within 5 turns, <= 5 % of present-target searches
wrongly flagged. Prints one JSON line per (prior, threshold) setting and the headline setting.

    PYTHONPATH=src taskset -c 0 python benchmarks/bench_presence.py --data outputs/demo/data \\
        --run outputs/demo/runs/synthetic --split test --searches 60
(without --run: the attribute backend with simulated noisy predictions, no model needed)
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def _search(session_of, user, turns: int, index) -> tuple[list[float], bool]:
    """Run one simulated search; returns (the match probability of each image ruled out when it was,
    as the page shows it; whether the user confirmed the target)."""
    from minterpr.language.dialogue_acts import verdict
    from minterpr.types import ReferenceTurn

    session = session_of()
    session.describe(user.describe())
    ruled_out: list[float] = []
    for _ in range(turns):
        turn = user.respond(session.action)
        if turn is None:
            break
        if isinstance(turn, ReferenceTurn):
            if verdict(turn.feedback) is True:
                return ruled_out, True
            i = index.index_of(turn.reference_path)
            rank = None if i is None else session.step.rank_of(i)
            if verdict(turn.feedback) is False:
                ruled_out.append(0.0 if rank is None else float(session.step.match()[rank]))
        session.add(turn)
    return ruled_out, False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a synthetic dataset (minterpr data synth / demo)")
    parser.add_argument("--run", default=None, help="a trained run (default: the attribute backend, noise 1.0)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--searches", type=int, default=60, help="targets (each searched present and absent)")
    parser.add_argument("--turns", type=int, default=5, help="turns after the description")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--match-temperature", type=float, default=None,
                        help="the match's softmax temperature (default: the run's fitted one, else 0.02)")
    args = parser.parse_args(argv)

    from minterpr.index.gallery_index import GalleryIndex
    from minterpr.interaction.attribute_backend import AttributeBackend
    from minterpr.interaction.presence import ABSENT_BELOW, PRIOR_PRESENT, presence_probability
    from minterpr.interaction.session import Session
    from minterpr.interaction.simulators import SIMULATORS
    from minterpr.training.config import DataConfig
    from minterpr.training.data import load_split

    split = load_split(DataConfig(root=args.data), args.split)
    if args.run:
        from minterpr.runtime.pipeline import load_pipeline

        pipeline = load_pipeline(args.run, engine="torch")
        backend, options = pipeline.backend, {"reranking": pipeline.rerank_config(),
                                              "match_temperature": pipeline.extras.match_temperature()}
        full = pipeline.index_images(split.gallery, root=str(split.image_root), progress=False)
    else:
        backend, options = AttributeBackend(noise=1.0, seed=args.seed), {}
        full = backend.index_images(split.gallery, root=str(split.image_root))
    if args.match_temperature is not None:
        options["match_temperature"] = args.match_temperature
    rng = np.random.default_rng(args.seed)
    pids = sorted({im.person_id for im in full.images})
    targets = [pids[k] for k in rng.permutation(len(pids))[: args.searches]]
    simulator = SIMULATORS.create("oracle")
    runs: dict[str, list] = {"present": [], "absent": []}
    confirmed = 0
    started = time.perf_counter()
    for q, pid in enumerate(targets):
        target = next(im for im in full.images if im.person_id == pid)
        keep = [k for k, im in enumerate(full.images) if im.person_id != pid]
        absent = GalleryIndex([full.images[k] for k in keep], full.embeddings[keep],
                              attribute_probs=None if full.attribute_probs is None else full.attribute_probs[keep],
                              root=full.root)
        for name, index in (("present", full), ("absent", absent)):
            user = simulator.user(target, index, query=q, seed=args.seed)
            states, found = _search(lambda: Session(backend, index, seed=args.seed + q, **options), user, args.turns,
                                    index)
            runs[name].append(states)
            confirmed += found and name == "present"
    elapsed = time.perf_counter() - started

    def rate(name: str, prior: float, threshold: float) -> float:
        """% of the searches flagged within the turns (the estimate only falls: the last is the lowest)."""
        flagged = [presence_probability(masses, prior) < threshold for masses in runs[name]]
        return 100.0 * float(np.mean(flagged))

    for prior in (0.5, 0.7, 0.9):
        for threshold in (0.2, 0.3, 0.5):
            print(json.dumps({"prior": prior, "threshold": threshold, "absent_flagged_pct": rate("absent", prior, threshold),
                              "present_flagged_pct": rate("present", prior, threshold)}))
    print(json.dumps({"headline": True, "backend": "run " + args.run if args.run else "attribute noise 1.0",
                      "split": args.split, "searches": len(targets), "turns": args.turns, "prior": PRIOR_PRESENT,
                      "threshold": ABSENT_BELOW,
                      "match_temperature": options.get("match_temperature", 0.02), "absent_flagged_pct": rate("absent", PRIOR_PRESENT, ABSENT_BELOW),
                      "present_flagged_pct": rate("present", PRIOR_PRESENT, ABSENT_BELOW),
                      "present_confirmed_pct": 100.0 * confirmed / len(targets), "gallery": len(full),
                      "seconds": round(elapsed, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
