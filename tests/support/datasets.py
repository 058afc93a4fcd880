"""Datasets written in their sources' own layouts (CUHK-PEDES, ICFG-PEDES, RSTPReid, TBPS,
ChatPedes) with drawn images, and the ``minterpr data convert`` arguments for them: the converter
tests' inputs, shared with the CLIP config test; and a tiny synthetic world for training tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

from minterpr.data.synthetic.dataset import SyntheticDatasetConfig, build_synthetic_dataset
from minterpr.data.synthetic.world import SyntheticWorldConfig


COLOURS = {
    "red": (200, 30, 30),
    "blue": (30, 40, 200),
    "green": (30, 160, 40),
    "black": (15, 15, 15),
    "white": (235, 235, 235),
    "yellow": (230, 210, 30),
}
NAMES = list(COLOURS)
# identities per split: train 6, val 3, test 3 (two images each)
SPLIT_IDS = {"train": range(1, 7), "val": range(7, 10), "test": range(10, 13)}


def person(pid: int) -> tuple[str, str, str, str]:
    """(gender, top colour, bottom colour, bag) of identity ``pid``."""
    return (
        "man" if pid % 2 else "woman",
        NAMES[pid % 6],
        NAMES[(pid * 5 + 1) % 6],
        "backpack" if pid % 3 else "handbag",
    )


def captions_of(pid: int, k: int) -> list[str]:
    gender, top, bottom, bag = person(pid)
    return [
        f"A {gender} in a {top} shirt and {bottom} pants, carrying a {bag}.",
        f"The {gender} wears a {top} jacket{' and black shoes' if k else ''}. {bottom.capitalize()} trousers.",
    ]


def draw(path: Path, pid: int, k: int) -> None:
    _, top, bottom, _ = person(pid)
    image = Image.new("RGB", (16, 32), COLOURS[top])
    image.paste(COLOURS[bottom], (0, 16, 16, 32))
    image.putpixel((k, 0), (k * 40, 0, 0))  # two views of one person differ
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)


def caption_rows(root: Path, image_path) -> list[dict]:
    """Rows of a CUHK-PEDES-style file (split, captions, file_path, processed_tokens, id); images drawn."""
    rows = []
    for split, ids in SPLIT_IDS.items():
        for pid in ids:
            for k in range(2):
                path = image_path(split, pid, k)
                draw(root / path, pid, k)
                caps = captions_of(pid, k)
                rows.append(
                    {
                        "split": split,
                        "captions": caps,
                        "file_path": path,
                        "id": pid,
                        "processed_tokens": [c.lower().split() for c in caps],
                    }
                )
    return rows


def cuhk_pedes(root: Path) -> tuple[str, list[Path], Path]:
    images = root / "CUHK-PEDES" / "imgs"
    rows = caption_rows(images, lambda split, pid, k: f"{'CUHK01' if pid % 2 else 'cam_a'}/{pid:04d}{k:03d}.png")
    (root / "CUHK-PEDES" / "reid_raw.json").write_text(json.dumps(rows))  # one line, as released
    return "cuhk-pedes", [root / "CUHK-PEDES" / "reid_raw.json"], images


def icfg_pedes(root: Path) -> tuple[str, list[Path], Path]:
    images = root / "ICFG-PEDES" / "imgs"
    rows = caption_rows(
        images,
        lambda split, pid, k: (
            f"{'test' if split == 'test' else 'train'}/{pid:04d}/{pid:04d}_010_0{k}_0303morning_{k:04d}_0.jpg"
        ),
    )
    for row in rows:  # ICFG-PEDES has train and test only
        row["split"] = "test" if row["split"] == "test" else "train"
    (root / "ICFG-PEDES" / "ICFG-PEDES.json").write_text(json.dumps(rows))
    return "icfg-pedes", [root / "ICFG-PEDES" / "ICFG-PEDES.json"], images


def rstpreid(root: Path) -> tuple[str, list[Path], Path]:
    images = root / "RSTPReid" / "imgs"
    rows = caption_rows(images, lambda split, pid, k: f"{pid:04d}_c{k + 1}_{k:04d}.jpg")
    rows = [{"id": r["id"], "img_path": r["file_path"], "captions": r["captions"], "split": r["split"]} for r in rows]
    (root / "RSTPReid" / "data_captions.json").write_text(json.dumps(rows))
    return "rstpreid", [root / "RSTPReid" / "data_captions.json"], images


def tbps(root: Path) -> tuple[str, list[Path], Path]:
    images = root / "CUHK-PEDES" / "imgs"
    rows = caption_rows(images, lambda split, pid, k: f"CUHK03/{pid}_{k}.jpg")
    folder = root / "CUHK-PEDES" / "ann"
    folder.mkdir(parents=True)
    for split in SPLIT_IDS:  # {split}_reid.json without a split field; back-translated captions beside
        (folder / f"{split}_reid.json").write_text(
            json.dumps(
                [
                    {
                        "id": r["id"],
                        "file_path": r["file_path"],
                        "captions": r["captions"],
                        "captions_bt": [c.upper() for c in r["captions"]],
                    }
                    for r in rows
                    if r["split"] == split
                ]
            )
        )
    return "tbps", [folder], images


def chatpedes(root: Path) -> tuple[str, list[Path], Path]:
    images = root / "ChatPedes" / "imgs"
    rows = caption_rows(images, lambda split, pid, k: f"CUHK01/{pid:04d}{k:03d}.png")
    files = []
    for split in ("train", "test"):  # released as a train and a test file: val is drawn from train
        records = []
        for r in (r for r in rows if r["split"] in ((split,) if split == "test" else ("train", "val"))):
            _, _, _, bag = person(r["id"])
            records.append(
                {
                    "id": r["id"],
                    "file_path": r["file_path"],
                    "chats": [
                        [
                            {"from": "gpt", "value": "Please describe the person you saw."},
                            {"from": "user", "value": r["captions"][0]},
                        ],
                        [
                            {"from": "gpt", "value": "Was the person carrying anything?"},
                            {"from": "user", "value": f"a {bag}"},
                        ],
                    ],
                }
            )
        files.append(root / "ChatPedes" / f"{split}.json")
        files[-1].write_text(json.dumps(records, indent=1))
    return "chatpedes", files, images


LAYOUTS = {
    "cuhk-pedes": cuhk_pedes,
    "icfg-pedes": icfg_pedes,
    "rstpreid": rstpreid,
    "tbps": tbps,
    "chatpedes": chatpedes,
}


def convert_args(fmt: str, annotations: list[Path], images: Path, out: Path, *extra: str) -> list[str]:
    return [
        "data",
        "convert",
        "--from",
        fmt,
        "--annotations",
        *map(str, annotations),
        "--images",
        str(images),
        "--out",
        str(out),
        "--quiet",
        *extra,
    ]


def make_tiny_dataset(root: Path) -> Path:
    """A tiny synthetic world (64x32 images): 6 / 4 / 4 identities, dialogues with reference turns."""
    world = SyntheticWorldConfig(
        train_identities=6, val_identities=4, test_identities=4, image_size=(64, 32), workers=1
    )
    build_synthetic_dataset(root, SyntheticDatasetConfig(world=world), progress=False)
    return root


def make_cuhk03(root, people: int = 6, shots: int = 4):
    """A CUHK03-shaped folder: each person one colour, shots 00.. on camera 0, 05.. on camera 1."""
    folder = root / "images"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for person in range(people):
        colour = rng.integers(0, 256, 3)
        for shot in [*range(shots // 2), *range(5, 5 + shots - shots // 2)]:
            pixels = np.clip(colour + rng.normal(0, 20, (32, 16, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(folder / f"{person:04d}_{shot:02d}.jpg")
    return root
