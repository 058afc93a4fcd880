"""Fixtures of ``probe_bad_inputs.py``: a tiny dataset, a tiny trained run and the bad inputs.

Everything lives under one folder ``F`` (a temporary directory unless ``--fixtures DIR`` is
given, which also lets a second run reuse what the first built):

    F/ds                 `minterpr data synth` at 64x32, 8/4/4 identities (seed 0)
    F/run                `minterpr train --config tiny` on F/ds
    F/outside.png        a valid image outside every dataset root (path-escape probes)
    F/bad/               broken dataset files (+ a copy of F/ds/images, so paths resolve)
    F/runs/NAME/         broken run directories;   F/resume/NAME/  runs with a broken last.pt
    F/img/               odd images;               F/chatimgs_*/   image folders for chat
    F/build/NAME/        killed, truncated and dirty dataset builds
    F/out/               where probed commands write;   F/marker/  what a pickle payload touches

Building them runs two CLI commands (synth, train) and a killed synth; the rest is file surgery.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from probe_fixtures_files import build_bad_files

SYNTH_ARGS = [
    "--train-identities",
    "8",
    "--val-identities",
    "4",
    "--test-identities",
    "4",
    "--height",
    "64",
    "--width",
    "32",
    "--workers",
    "1",
    "--quiet",
]
PYTHON = sys.executable


def child_env() -> dict[str, str]:
    """One thread per child: the machine is small and shared, and threads only add noise here."""
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONHASHSEED="0",
        TQDM_DISABLE="1",
        PYTHONWARNINGS="ignore",
    )
    return env


def minterpr(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "minterpr", *args], capture_output=True, text=True, timeout=timeout, env=child_env()
    )


def _need(proc: subprocess.CompletedProcess, what: str) -> None:
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"fixture {what} failed (exit {proc.returncode}):\n  " + "\n  ".join(tail))


# ----------------------------------------------------------------------------- dataset + run
def build_dataset(F: Path) -> None:
    if not (F / "ds" / "test.jsonl").is_file():
        _need(minterpr("data", "synth", "--out", str(F / "ds"), *SYNTH_ARGS), "data synth")


def build_run(F: Path) -> None:
    if not (F / "run" / "model.pt").is_file():
        _need(
            minterpr(
                "train",
                "--config",
                "tiny",
                "--data",
                str(F / "ds"),
                "--out",
                str(F / "run"),
                "--set",
                "stages.2.epochs=1",
            ),
            "train",
        )


def test_images(F: Path) -> list[str]:
    """Gallery paths of the test split (relative to F/ds)."""
    rows = [json.loads(line) for line in (F / "ds" / "gallery_test.jsonl").read_text().splitlines() if line.strip()]
    return [row["path"] for row in rows]


# ----------------------------------------------------------------------------- broken runs
class Payload:
    """Unpickling this makes the directory ``path``: proof that arbitrary code ran."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def build_broken_runs(F: Path) -> None:
    import torch

    runs = F / "runs"
    if (runs / "done").is_file():
        return
    model = F / "run" / "model.pt"
    data = model.read_bytes()
    payload = torch.load(model, weights_only=True)

    def put(name: str, content: bytes | None = None, obj=None) -> None:
        d = runs / name
        d.mkdir(parents=True, exist_ok=True)
        if obj is not None:
            torch.save(obj, d / "model.pt")
        elif content is not None:
            (d / "model.pt").write_bytes(content)

    put("empty_dir")
    put("zero_bytes", b"")
    put("truncated", data[: len(data) // 2])
    put("random_bytes", random.Random(1).randbytes(4096))
    put("text_file", b"this is not a model\n")
    put("not_minterpr", obj={"weights": torch.zeros(3)})
    put("missing_config", obj={k: v for k, v in payload.items() if k != "config"})
    put("missing_extra", obj={k: v for k, v in payload.items() if k != "extra"})
    put("wrong_version", obj={**payload, "version": 99})
    config = json.loads(json.dumps(payload["config"]))
    for key in ("image_encoder", "encoder", "image_backbone"):
        if key in config:
            config[key] = "no_such_encoder"
    put("unknown_encoder", obj={**payload, "config": config})
    state = dict(payload["state_dict"])
    first = next(k for k, v in state.items() if v.ndim >= 2)
    put("shape_mismatch", obj={**payload, "state_dict": {**state, first: torch.zeros(3, 3)}})
    put("missing_key", obj={**payload, "state_dict": {k: v for k, v in state.items() if k != first}})
    put("extra_scoring_garbage", obj={**payload, "extra": {"scoring": "not a dict", "calibration": [1, 2]}})
    # one payload per prober, each with its own marker: cases run concurrently
    put("pickle_payload", obj={**payload, "extra": {"evil": Payload(str(F / "marker" / "cli_model_pt_ran"))}})
    put("pickle_payload_api", obj={**payload, "extra": {"evil": Payload(str(F / "marker" / "api_model_pt_ran"))}})
    (runs / "model_pt_dir" / "model.pt").mkdir(parents=True, exist_ok=True)
    (F / "marker").mkdir(exist_ok=True)
    # runs whose last.pt (the resume checkpoint) is broken
    resume = F / "resume"
    checkpoint = torch.load(F / "run" / "last.pt", weights_only=False)  # our own file, written by train
    for name in ("pickle_payload", "zero_bytes", "truncated", "random_bytes", "model_as_last", "missing_last"):
        d = resume / name
        if d.exists():
            shutil.rmtree(d)
        shutil.copytree(F / "run", d, ignore=shutil.ignore_patterns("cache"))
        last = d / "last.pt"
        if name == "pickle_payload":
            torch.save({**checkpoint, "evil": Payload(str(F / "marker" / "last_pt_ran"))}, last)
        elif name == "zero_bytes":
            last.write_bytes(b"")
        elif name == "truncated":
            last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
        elif name == "random_bytes":
            last.write_bytes(random.Random(2).randbytes(4096))
        elif name == "model_as_last":
            shutil.copyfile(model, last)
        elif name == "missing_last":
            last.unlink()
    (runs / "done").write_text("ok")


# ----------------------------------------------------------------------------- odd images
def build_images(F: Path) -> None:
    from PIL import Image

    img = F / "img"
    if (img / "done").is_file():
        return
    img.mkdir(parents=True, exist_ok=True)
    src = Image.open(F / "ds" / test_images(F)[0]).convert("RGB")
    src.save(img / "good.png")
    src.save(F / "outside.png")
    src.save(img / "good_copy.png")
    grey = src.convert("L")
    grey.save(img / "grey8.png")
    wide = Image.fromarray((__import__("numpy").asarray(grey).astype("uint16") * 257))
    wide.save(img / "grey16.png")  # mode I;16: the same picture at 16 bits per sample
    Image.new("RGB", src.size, (255, 255, 255)).save(img / "white.png")
    src.convert("CMYK").save(img / "cmyk.jpg", quality=95)
    pal = src.convert("P", palette=Image.Palette.ADAPTIVE, colors=255)
    pal.info["transparency"] = 0
    pal.save(img / "palette_alpha.png", transparency=0)
    src.convert("RGBA").save(img / "rgba.png")
    src.convert("LA").save(img / "la.png")
    src.convert("1").save(img / "one_bit.png")
    # stored rotated, with EXIF orientation 6 ("rotate 90 clockwise to display"): shows as good.png
    exif = Image.Exif()
    exif[0x0112] = 6
    src.rotate(90, expand=True).save(img / "exif_rotated.png", exif=exif)
    src.resize((1, 1)).save(img / "one_pixel.png")
    src.save(img / "animated.gif", save_all=True, append_images=[src.rotate(180)])
    src.save(img / "good.jpg", quality=95)
    jpeg = (img / "good.jpg").read_bytes()
    (img / "truncated.jpg").write_bytes(jpeg[: len(jpeg) * 6 // 10])
    (img / "zero.jpg").write_bytes(b"")
    (img / "random.jpg").write_bytes(random.Random(3).randbytes(2048))
    (img / "text.jpg").write_text("GIF89a? no, just text\n")
    (img / "a_directory.jpg").mkdir(exist_ok=True)
    Image.new("L", (12000, 16000)).save(img / "bomb.png")  # 192 Mpixel, a few KB compressed
    # chat --images folders (no manifest): one unreadable file among good ones, or only bad ones
    for name, bad in (("chatimgs_one_bad", ["random.jpg"]), ("chatimgs_all_bad", ["random.jpg", "zero.jpg"])):
        d = F / name
        d.mkdir(exist_ok=True)
        if name == "chatimgs_one_bad":
            for k, path in enumerate(test_images(F)[:6]):
                shutil.copyfile(F / "ds" / path, d / f"p{k}.jpg")
        for b in bad:
            shutil.copyfile(img / b, d / f"bad_{b}")
    (img / "done").write_text("ok")


# ----------------------------------------------------------------------------- broken builds
def _copy_ds(F: Path, name: str) -> Path:
    d = F / "build" / name
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(F / "ds", d)
    return d


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def killed_build(F: Path, log: list[str]) -> None:
    """``data synth --seed 1`` over a finished seed-0 build, SIGKILLed once it has begun writing."""
    d = _copy_ds(F, "killed")
    before = {p: p.stat().st_mtime_ns for p in d.rglob("*")}
    start = time.time()
    proc = subprocess.Popen(
        [
            PYTHON,
            "-m",
            "minterpr",
            "data",
            "synth",
            "--out",
            str(d),
            "--seed",
            "1",
            "--train-identities",
            "3000",
            "--val-identities",
            "4",
            "--test-identities",
            "4",
            "--height",
            "64",
            "--width",
            "32",
            "--workers",
            "1",
            "--quiet",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=child_env(),
    )
    changed = False
    while time.time() - start < 60 and proc.poll() is None:
        now = {p: p.stat().st_mtime_ns for p in d.rglob("*") if p.exists()}
        if set(now) != set(before) or any(now[p] != before.get(p) for p in now):
            changed = True
            time.sleep(0.3)  # let it write a little more: a mix of old and new files
            break
        time.sleep(0.02)
    alive = proc.poll() is None
    if alive:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    state = (
        "killed while writing"
        if alive and changed
        else ("finished before the kill" if not alive else "killed before writing")
    )
    (d / ".probe_state").write_text(state)
    log.append(f"killed build: {state} after {time.time() - start:.1f}s")


def build_builds(F: Path, log: list[str]) -> None:
    if (F / "build" / "done").is_file():
        return
    killed_build(F, log)
    if (F / "build" / "killed_rerun").exists():
        shutil.rmtree(F / "build" / "killed_rerun")
    shutil.copytree(F / "build" / "killed", F / "build" / "killed_rerun")
    _truncate(_copy_ds(F, "trunc_split") / "test.jsonl")
    _truncate(_copy_ds(F, "trunc_gallery") / "gallery_test.jsonl")
    _truncate(_copy_ds(F, "rerun_trunc") / "test.jsonl")
    d = _copy_ds(F, "rerun_tmp")
    (d / ".test.jsonl.deadbeef.tmp").write_text('{"half": ')
    image = sorted((d / "images" / "test").iterdir())[0]
    (image.parent / f".{image.name}.cafe0123.tmp").write_bytes(b"\xff\xd8")
    d = _copy_ds(F, "rerun_missing_image")
    sorted((d / "images" / "test").iterdir())[0].unlink()
    d = _copy_ds(F, "missing_image")
    sorted((d / "images" / "test").iterdir())[0].unlink()
    (F / "build" / "done").write_text("ok")


def build_all(F: Path, log: list[str]) -> None:
    """Build every fixture under F (what exists is kept); ``log`` collects notes for the report."""
    F.mkdir(parents=True, exist_ok=True)
    (F / "out").mkdir(exist_ok=True)
    (F / "marker").mkdir(exist_ok=True)
    t = time.time()
    build_dataset(F)
    build_run(F)
    log.append(f"dataset + run ready in {time.time() - t:.0f}s")
    build_bad_files(F)
    build_images(F)
    build_broken_runs(F)
    build_builds(F, log)
