"""Can a new site's value frequencies be read from the model's own answers there (no labels)?

Issue 37 item 3: the slot answers (:mod:`minterpr.interaction.slot_answers`) fall back to val's
majority value, and lose to always answering the *site's* majority where the two differ. This
measures two label-free estimates of each slot's value frequencies on the site (the test split of a
leave-one-camera-set-out fold, its labels used only to score):

* ``mean_p``: the mean of the model's probabilities over the site's crops;
* ``em``: EM prior adaptation (Saerens, Latinne and Decaestecker, 2002), per attribute column,
  starting from val's frequencies: the probabilities are re-weighted by new/old prior until the
  prior equals their mean.

and answers with them (the estimated majority always; the EM-adjusted probabilities), beside the
raw answer, the calibrated answer fitted on val, val's majority and the site's true majority.
Prints one JSON line per slot and a mean line (percent of labelled crops answered with one of
their values).

    python benchmarks/bench_slot_site_prior.py --run runs/fold_F --data data/peta_cw_fold_F
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from minterpr import load_pipeline
from minterpr.data.dataset import BuiltDataset
from minterpr.evaluation.attribute_metrics import attribute_targets
from minterpr.interaction.slot_answers import UNSURE, fit_slot_answers, group_of
from minterpr.language.ontology import ONTOLOGY


def crops(pipeline, data: str, split: str):
    """(probs, targets, mask, camera sets) of a split's labelled crops."""
    images = [i for i in BuiltDataset(data).gallery(split) if i.attributes]
    index = pipeline.index_images(images, root=data, progress=False)
    targets, mask = attribute_targets(index.images)
    groups = [group_of(i.camera_id, i.person_id) for i in index.images]
    return np.asarray(index.attribute_probs, np.float64), targets > 0.5, mask.astype(bool), groups


def em_prior(p: np.ndarray, prior: np.ndarray, iterations: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """(N, C) probabilities made under ``prior`` -> (the site's prior, the re-weighted probabilities)."""
    p = np.clip(p, 1e-6, 1 - 1e-6)
    site = prior.copy()
    for _ in range(iterations):
        kept = p * (site / prior)
        adjusted = kept / (kept + (1 - p) * ((1 - site) / (1 - prior)))
        new = np.clip(adjusted.mean(axis=0), 1e-4, 1 - 1e-4)
        if np.abs(new - site).max() < 1e-7:
            break
        site = new
    return site, adjusted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="the model (a run, a model directory or shipped:NAME)")
    parser.add_argument("--data", required=True, help="a built fold (gallery_val.jsonl, gallery_test.jsonl)")
    args = parser.parse_args()
    pipeline = load_pipeline(args.run)
    val_p, val_t, val_m, val_g = crops(pipeline, args.data, "val")
    site_p, site_t, site_m, _ = crops(pipeline, args.data, "test")
    record = fit_slot_answers(val_p, val_t, val_m, val_g)
    rows = []
    for slot, columns in ONTOLOGY.slot_columns().items():
        labelled_val, labelled = val_m[:, columns[0]], site_m[:, columns[0]]
        if slot not in record.slots or not labelled.any() or not labelled_val.any():
            continue
        truth, p = site_t[labelled][:, columns], site_p[labelled][:, columns]
        prior = np.clip(val_t[labelled_val][:, columns].mean(axis=0), 1e-4, 1 - 1e-4)
        em_site, adjusted = em_prior(site_p[:, columns], prior)  # every site crop, labels unused
        answered = record.slots[slot].answer(p, slot)
        picks = {
            "raw": p.argmax(axis=1),
            "calibrated": np.where(answered == UNSURE, int(prior.argmax()), answered),
            "val_majority": int(prior.argmax()),
            "mean_p_majority": int(site_p[:, columns].mean(axis=0).argmax()),
            "em_majority": int(em_site.argmax()),
            "em_answer": adjusted[labelled].argmax(axis=1),
            "site_majority": int(truth.sum(axis=0).argmax()),  # needs the site's labels: the bar
        }
        rows.append(
            {"slot": slot, "crops": int(len(p))}
            | {k: round(100.0 * float(truth[np.arange(len(p)), v].mean()), 1) for k, v in picks.items()}
        )
        print(json.dumps(rows[-1]))
    keys = [k for k in rows[0] if k not in ("slot", "crops")]
    print(
        json.dumps(
            {"slot": "mean", "slots": len(rows)} | {k: round(float(np.mean([r[k] for r in rows])), 1) for k in keys}
        )
    )


if __name__ == "__main__":
    from minterpr.errors import MinterprError

    try:
        sys.exit(main())
    except MinterprError as err:  # a missing dataset or run, a bad file: one line, exit 2
        print(f"bench_slot_site_prior: {err}", file=sys.stderr)
        sys.exit(2)
