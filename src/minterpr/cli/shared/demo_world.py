"""The demo's world and model, built once and cached: what ``minterpr demo`` and ``minterpr serve --demo`` share."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path

from minterpr.cli.shared.model_options import describe_choices

log = logging.getLogger(__name__)

DEMO_IDENTITIES = {"train_identities": 500, "val_identities": 100, "test_identities": 300}
DEMO_IMAGE_SIZE = (256, 128)  # the default model's input size
DEMO_TRAIN_OVERRIDES = ("stages.0.epochs=4", "stages.1.epochs=2", "stages.2.epochs=2")


def say(message: str) -> None:
    log.info("[demo] %s", message)


def build_data(out: Path, seed: int, progress: bool = True) -> Path:
    from minterpr.data.synthetic.dataset import SyntheticDatasetConfig, build_synthetic_dataset
    from minterpr.data.synthetic.world import SyntheticWorldConfig

    data_dir = out / "data"
    world = SyntheticWorldConfig(seed=seed, image_size=DEMO_IMAGE_SIZE, **DEMO_IDENTITIES)
    started = time.time()
    info = build_synthetic_dataset(data_dir, SyntheticDatasetConfig(world=world), progress=progress)
    test = info["splits"]["test"]
    say(
        f"data: {data_dir} ({test['images']} test images of {test['identities']} people; {time.time() - started:.0f} s)"
    )
    return data_dir


def _portable_stamp(config: dict, data_dir: Path, out: Path) -> str:
    """The run's settings as a stamp that does not depend on where the cache lies: the data folder is
    named relative to ``out``, so a copied or moved demo cache is still the same cache."""
    data = config.get("data")
    if isinstance(data, dict) and data.get("root") is not None and Path(str(data["root"])) == data_dir:
        try:
            data["root"] = os.path.join("<demo-out>", os.path.relpath(data_dir, out))
        except ValueError:  # another drive: leave it as it is
            pass
    return json.dumps(config, sort_keys=True, default=str)


def train_model(
    out: Path, data_dir: Path, seed: int, config: str = "synthetic", device: str | None = None, progress: bool = True
) -> Path:
    from minterpr.training.config import load_config
    from minterpr.training.trainer import train

    run_dir = out / "run"
    overrides = DEMO_TRAIN_OVERRIDES if config == "synthetic" else ()
    settings = [f"data.root={data_dir}", f"seed={seed}", *overrides]
    cfg = load_config(config, settings)
    legacy = json.dumps(cfg.to_dict(), sort_keys=True, default=str)  # stamps before they were portable
    wanted = _portable_stamp(cfg.to_dict(), data_dir, out)
    if device is not None:  # not part of the stamp: the same model, trained anywhere (checked as --set would be)
        cfg = load_config(config, [*settings, f"device={device}"])
    cfg.progress = cfg.progress and progress
    stamp = run_dir / "demo_config.json"  # the settings of the run in run_dir (written before training)
    finished = run_dir / "demo_finished.json"  # the same, written once training and the weight choice ended
    if (run_dir / "model.pt").is_file() and finished.is_file() and finished.read_text() in (wanted, legacy):
        say(f"model: {run_dir / 'model.pt'} (cached)")
        calibrate_demo_match(run_dir, data_dir)  # a demo trained before match temperatures were fitted
        calibrate_demo_presence(run_dir, data_dir)  # ... or before presence models were
        return run_dir
    started = time.time()
    resume = (run_dir / "last.pt").is_file() and stamp.is_file() and stamp.read_text() in (wanted, legacy)
    if not resume and run_dir.exists():  # a run of other settings (e.g. an older minterpr): start afresh
        say(f"model: {run_dir} holds a run with other settings; training a new one")
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    stamp.write_text(wanted)
    result = train(cfg, run_dir, resume=resume)
    if cfg.calibrate_attributes or cfg.select_attribute_weight:  # as `minterpr train` does
        from minterpr.training.post_training import calibrate_and_choose_weight

        say(describe_choices(calibrate_and_choose_weight(cfg, result.model_path)))
    calibrate_demo_match(run_dir, data_dir)
    calibrate_demo_presence(run_dir, data_dir)
    finished.write_text(wanted)
    say(f"model: {run_dir / 'model.pt'} (trained in {time.time() - started:.0f} s)")
    return run_dir


def calibrate_demo_match(run_dir: Path, data_dir: Path) -> None:
    """Fit the page's match temperature on the demo's val searches (``minterpr calibrate match``),
    once: a run that holds the record keeps it."""
    from minterpr.evaluation.match_calibration import calibrate_match
    from minterpr.runtime.pipeline import load_pipeline
    from minterpr.data.dataset import BuiltDataset
    from minterpr.training.post_training import store_match_calibration

    pipeline = load_pipeline(run_dir, engine="torch")
    if pipeline.extras.match is not None:
        return
    say("fitting the match temperature on val: simulated searches (about a minute on 2 cores) ...")
    split = BuiltDataset(data_dir).split("val")
    index = pipeline.index_images(split.gallery, root=str(split.image_root), progress=False)
    record = calibrate_match(
        pipeline.backend, index, split="val", session_options={"reranking": pipeline.rerank_config()}
    )
    store_match_calibration(run_dir, record)
    say(
        f"match temperature fitted on val: {record.temperature:.3g} (mean -log P(target) {record.nll_before:.2f} -> "
        f"{record.nll_after:.2f})"
    )


def calibrate_demo_presence(run_dir: Path, data_dir: Path) -> None:
    """Fit "probably not in this footage" on the demo's val searches (``minterpr calibrate presence``,
    after the match temperature it reads), once: a run that holds the record keeps it."""
    from minterpr.evaluation.presence_calibration import calibrate_presence
    from minterpr.runtime.pipeline import load_pipeline
    from minterpr.data.dataset import BuiltDataset
    from minterpr.training.post_training import store_presence_model

    pipeline = load_pipeline(run_dir, engine="torch")
    if pipeline.extras.presence is not None:
        return
    # minutes of simulated searches with no line on the screen otherwise (after the match temperature's)
    say(
        "fitting the presence model on val: simulated searches with and without their target "
        "(a few minutes on 2 cores) ..."
    )
    split = BuiltDataset(data_dir).split("val")
    index = pipeline.index_images(split.gallery, root=str(split.image_root), progress=False)
    options = {"reranking": pipeline.rerank_config(), "match_temperature": pipeline.extras.match_temperature()}
    record = calibrate_presence(pipeline.backend, index, split="val", session_options=options)
    store_presence_model(run_dir, record)
    say(
        f"presence model fitted on val: threshold {record.threshold:.3g}, there {record.absent_flagged_pct:.0f} % of "
        f"absent-target searches flagged within 5 turns, {record.present_flagged_pct:.0f} % of present ones"
    )
