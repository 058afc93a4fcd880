"""Convert the field's text-based person search datasets into minterpr's training layout.

``convert_dataset(config, out_dir)`` reads CUHK-PEDES, ICFG-PEDES, RSTPReid, TBPS-CLIP style
or ChatPedes annotations with the validating readers of :mod:`minterpr.data.formats` (images
checked to exist under ``config.images``), and writes the layout of :mod:`minterpr.data.build`
that ``minterpr train``, ``eval`` and ``simulate`` read:

* the datasets' **official splits** (the ``split`` field, or for TBPS files the file name
  ``{split}_reid.json``); a source without a val split (ICFG-PEDES has train and test only)
  gets one drawn from the training *identities* (``val_fraction``, seeded), recorded in
  ``dataset.json``;
* **identity-disjoint**, checked: an identity in two splits is a :class:`DatasetError` naming
  the file, the identity and both splits;
* ``gallery_<split>.jsonl``: every image of the split once, with its identity; no attributes
  (the sources have none) unless dialogues are synthesised (below);
* ``<split>.jsonl`` (MInterPEDES): caption datasets give one **round-0 sample per caption**
  (the dialogue is the description alone; ``caption_index`` names the caption); ChatPedes
  gives its dialogues (description + Q&A turns). With ``synthesise_dialogues`` each caption
  opens a dialogue with Q&A and reference turns instead (:mod:`minterpr.data.convert_dialogues`),
  and the manifests carry the attribute labels parsed from the captions;
* ``images``: a symbolic link to ``config.images`` (nothing is copied); paths are
  ``images/<path as in the annotations>``.

Every written file is read back strictly, images checked, before the build marker is written
(a failure leaves the folder marked unfinished, which readers refuse).

Example:
    >>> config = ConvertConfig("cuhk-pedes", ("CUHK-PEDES/reid_raw.json",), "CUHK-PEDES/imgs")  # doctest: +SKIP
    >>> convert_dataset(config, "data/cuhk-pedes")["splits"]["test"]["records"]  # doctest: +SKIP
    6156
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field, replace
from pathlib import Path

from minterpr.data.build import DIR_PLACEHOLDER, begin_build, dialogue_config_dict, finish_build
from minterpr.data.layout import IMAGES_DIR, SPLITS, split_files
from minterpr.data.dialogue_synthesis import DialogueSynthesisConfig
from minterpr.data.formats.captions import read_caption_dataset
from minterpr.data.formats.chatpedes import read_chatpedes
from minterpr.data.formats.gallery import read_gallery, write_gallery
from minterpr.data.formats.minterpedes import read_minterpedes, write_minterpedes
from minterpr.data.layout import dialogues_file, gallery_file
from minterpr.errors import DatasetError, InputError
from minterpr.types import Dialogue, GalleryImage, ReferenceTurn, RetrievalSample, split_person_id

CONVERT_FORMATS = ("cuhk-pedes", "icfg-pedes", "rstpreid", "tbps", "chatpedes")
CAPTION_FORMATS = CONVERT_FORMATS[:4]
_SPLIT_WORDS = {split: split for split in SPLITS} | {"training": "train", "validation": "val", "testing": "test"}


@dataclass(frozen=True)
class ConvertConfig:
    """What ``minterpr data convert`` converts and how; stored in ``dataset.json``."""

    source_format: str  # one of CONVERT_FORMATS
    annotations: tuple[str, ...]  # annotation files (tbps, chatpedes: one per split, or a folder of them)
    images: str  # the dataset's image folder: the annotations' image paths are relative to it
    seed: int = 0  # seeds the val identities drawn from train (sources without val) and synthesised dialogues
    val_fraction: float = 0.1  # share of the training identities that become val when the source has no val split
    synthesise_dialogues: bool = False  # caption formats: Q&A + reference turns after each caption (module doc)
    max_qa_turns: int = (
        3  # with synthesise_dialogues: text turns per dialogue, 1..N (fewer when nothing is left to ask)
    )
    max_image_turns: int = 3  # with synthesise_dialogues: reference-image turns per dialogue, 1..N

    def __post_init__(self) -> None:
        if self.source_format not in CONVERT_FORMATS:
            raise InputError(
                f"unknown source format {self.source_format!r}: must be one of {', '.join(CONVERT_FORMATS)}"
            )
        if not self.annotations:
            raise InputError("no annotation file given")
        if not 0.0 < self.val_fraction < 1.0:
            raise InputError(f"val_fraction must be in (0, 1), got {self.val_fraction}")
        if self.synthesise_dialogues and self.source_format == "chatpedes":
            raise InputError("ChatPedes already holds dialogues: synthesise_dialogues is for caption datasets")
        if self.max_qa_turns < 0 or self.max_image_turns < 0:
            raise InputError("max_qa_turns and max_image_turns must be >= 0")

    def dialogue_config(self) -> DialogueSynthesisConfig:
        return DialogueSynthesisConfig(
            seed=self.seed,
            min_qa_turns=min(1, self.max_qa_turns),
            max_qa_turns=self.max_qa_turns,
            min_image_turns=min(1, self.max_image_turns),
            max_image_turns=self.max_image_turns,
        )


@dataclass
class _Split:
    """One split as read: its images (path -> identity, first-seen order), samples and captions."""

    images: dict[str, str] = field(default_factory=dict)  # source image path -> person id
    samples: list[RetrievalSample] = field(default_factory=list)  # paths relative to the source image folder
    captions: dict[str, list[str]] = field(default_factory=dict)  # caption formats: image path -> its captions
    files: dict[str, str] = field(default_factory=dict)  # person id -> annotation file it came from (messages)


def annotation_files(config: ConvertConfig) -> list[Path]:
    """The annotation files to read: each path given, a folder standing for its ``*.json`` files."""
    files: list[Path] = []
    for name in config.annotations:
        path = Path(name)
        if path.is_dir():
            found = sorted(p for p in path.glob("*.json") if p.is_file())
            if not found:
                raise DatasetError(path, "no *.json annotation file in this folder")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise DatasetError(path, "no such annotation file")
    return files


def _split_of_name(path: Path) -> str | None:
    """The split a file name states (``test_reid.json``, ``train.json``, ``chatpedes_val.json``)."""
    words = [w for w in path.stem.lower().replace("-", "_").split("_") if w]
    found = {_SPLIT_WORDS[w] for w in words if w in _SPLIT_WORDS}
    return found.pop() if len(found) == 1 else None


def _add(splits: dict[str, _Split], split: str, path: str, pid: str, file: Path) -> _Split:
    """Record image ``path`` of identity ``pid`` in ``split``; DatasetError when another record
    (of any split) gave the image to another identity."""
    for other in splits.values():
        if other.images.get(path, pid) != pid:
            raise DatasetError(
                file,
                f"image {path!r} is given to {pid} here and to {other.images[path]} in "
                f"{other.files[other.images[path]]}: one image shows one identity",
            )
    part = splits.setdefault(split, _Split())
    part.images.setdefault(path, pid)
    part.files.setdefault(pid, str(file))
    return part


def read_source(config: ConvertConfig) -> dict[str, _Split]:
    """Read every annotation file strictly (images checked under ``config.images``), by split."""
    images = Path(config.images)
    if not images.is_dir():
        raise DatasetError(
            images,
            "no such image folder (--images: the folder the annotations' image paths are "
            "relative to, e.g. CUHK-PEDES/imgs)",
        )
    splits: dict[str, _Split] = {}
    for file in annotation_files(config):
        if config.source_format == "chatpedes":
            for sample in read_chatpedes(file, image_root=images, check_images=True):
                split = sample.extra.get("split", _split_of_name(file))
                if split not in SPLITS:
                    raise DatasetError(
                        file,
                        f"cannot tell the split of {sample.target_path!r}: give records a "
                        "'split' field (train, val or test) or one file per split named after it",
                    )
                extra = {k: v for k, v in sample.extra.items() if k != "split"}
                _add(splits, split, sample.target_path, sample.person_id, file).samples.append(
                    replace(sample, extra=extra)
                )
            continue
        records = read_caption_dataset(
            file, format=config.source_format, image_root=images, check_images=True, split=None
        )
        for record in records:
            part = _add(splits, record.split, record.path, record.person_id, file)
            captions = part.captions.setdefault(record.path, [])
            for caption in record.captions:
                part.samples.append(
                    RetrievalSample(record.path, record.person_id, Dialogue(caption), {"caption_index": len(captions)})
                )
                captions.append(caption)
    if not splits:
        raise DatasetError(Path(config.annotations[0]), "no records: nothing to convert")
    check_identity_disjoint(splits)
    return splits


def check_identity_disjoint(splits: dict[str, _Split]) -> None:
    """DatasetError when an identity belongs to two splits (an image given to two identities is
    refused while reading)."""
    owner: dict[str, str] = {}
    for split in SPLITS:
        for pid in dict.fromkeys((splits[split].images.values() if split in splits else ())):
            first = owner.setdefault(pid, split)
            if first != split:
                raise DatasetError(
                    Path(splits[split].files[pid]),
                    f"identity {pid} is in the {first} and the {split} split ({splits[first].files[pid]}): "
                    "the splits must be identity-disjoint; fix the annotations' split fields",
                )


def draw_val_split(splits: dict[str, _Split], fraction: float, seed: int) -> int:
    """Move ``fraction`` of the training identities (at least one, seeded) to a new val split;
    returns how many identities moved. DatasetError when train has fewer than two identities."""
    train = splits["train"]
    people = sorted(set(train.images.values()))
    if len(people) < 2:
        raise DatasetError(
            Path(next(iter(train.files.values()))),
            f"no val split, and train has {len(people)} identity: too few to draw one from it",
        )
    rng = random.Random(seed)
    rng.shuffle(people)
    chosen = set(people[: min(len(people) - 1, max(1, round(len(people) * fraction)))])
    val, kept = _Split(), _Split()
    for path, pid in train.images.items():
        (val if pid in chosen else kept).images[path] = pid
    for pid, file in train.files.items():
        (val if pid in chosen else kept).files[pid] = file
    for sample in train.samples:
        (val if sample.person_id in chosen else kept).samples.append(sample)
    for path, captions in train.captions.items():
        (val if train.images[path] in chosen else kept).captions[path] = captions
    splits["train"], splits["val"] = kept, val
    return len(chosen)


def _int_ids(samples: list[RetrievalSample], fallback: str) -> tuple[str, dict[str, str]]:
    """(namespace, person id -> MInterPEDES id "namespace:int"): the ids themselves when they share
    one namespace and are canonical integers, else dense integers in first-seen order."""
    pids = list(dict.fromkeys(s.person_id for s in samples))
    parts = [split_person_id(pid) for pid in pids]
    namespaces = {ns for ns, _ in parts}
    if len(namespaces) == 1 and all(local.isdigit() and str(int(local)) == local for _, local in parts):
        return namespaces.pop(), {pid: pid for pid in pids}
    return fallback, {pid: f"{fallback}:{k}" for k, pid in enumerate(pids)}


def _under_images(sample: RetrievalSample) -> RetrievalSample:
    d = sample.dialogue
    refs = tuple(ReferenceTurn(f"{IMAGES_DIR}/{t.reference_path}", t.feedback) for t in d.reference_turns)
    return replace(sample, target_path=f"{IMAGES_DIR}/{sample.target_path}", dialogue=replace(d, reference_turns=refs))


def write_converted_split(out: Path, name: str, part: _Split, config: ConvertConfig) -> dict[str, int]:
    """Write ``gallery_<name>.jsonl`` and ``<name>.jsonl`` of one split; returns its counts."""
    from minterpr.data.convert_dialogues import caption_attributes, caption_dialogues

    labels = {path: caption_attributes(c) for path, c in part.captions.items()} if config.synthesise_dialogues else {}
    gallery = [
        GalleryImage(f"{IMAGES_DIR}/{path}", pid, attributes=labels.get(path) if labels else None)
        for path, pid in part.images.items()
    ]
    write_gallery(gallery, out / gallery_file(name))
    if config.synthesise_dialogues:
        dialogue_config = replace(config.dialogue_config(), seed=config.seed + SPLITS.index(name))
        targets = [
            (image, k, caption)
            for image in gallery
            for k, caption in enumerate(part.captions[image.path.removeprefix(f"{IMAGES_DIR}/")])
        ]
        samples = caption_dialogues(targets, gallery, dialogue_config)
    else:
        samples = [_under_images(s) for s in part.samples]
    namespace, ids = _int_ids(samples, config.source_format)
    write_minterpedes(
        [replace(s, person_id=ids[s.person_id]) for s in samples], out / dialogues_file(name), namespace=namespace
    )
    return {"images": len(gallery), "identities": len(set(part.images.values())), "records": len(samples)}


def validate_converted(out: Path, splits: list[str]) -> None:
    """Read back every written file strictly with its images checked; every dialogue's target
    and reference images must be in the split's gallery. Raises the first problem."""
    for split in splits:
        gallery = {image.path for image in read_gallery(out / gallery_file(split), check_images=True)}
        for number, sample in enumerate(read_minterpedes(out / dialogues_file(split), check_images=True), start=1):
            for path in (sample.target_path, *(t.reference_path for t in sample.dialogue.reference_turns)):
                if path not in gallery:
                    raise DatasetError(
                        out / dialogues_file(split), f"record {number}: image {path!r} is not in {gallery_file(split)}"
                    )


def rebuild_args(config: ConvertConfig) -> list[str]:
    """The ``minterpr`` arguments that redo this conversion (absolute paths)."""
    args = [
        "data",
        "convert",
        "--from",
        config.source_format,
        "--annotations",
        *(os.path.abspath(a) for a in config.annotations),
        "--images",
        os.path.abspath(config.images),
        "--out",
        DIR_PLACEHOLDER,
        "--seed",
        str(config.seed),
        "--val-fraction",
        str(config.val_fraction),
    ]
    if config.synthesise_dialogues:
        args += [
            "--synthesise-dialogues",
            "--max-qa-turns",
            str(config.max_qa_turns),
            "--max-image-turns",
            str(config.max_image_turns),
        ]
    return args


def convert_dataset(config: ConvertConfig, out_dir: str | os.PathLike[str], *, progress: bool = False) -> dict:
    """Convert ``config``'s dataset into ``out_dir`` (module doc); returns the finished marker
    (``dataset.json``). Raises :class:`~minterpr.data.errors.DataError` for a bad record
    (file, record, field) and :class:`DatasetError` for splits that are not identity-disjoint,
    a missing file or folder, or an ``out_dir/images`` that is not a link to ``config.images``."""
    out = Path(out_dir)
    images_root = Path(config.images).resolve()
    splits = read_source(config)
    val_drawn = (
        draw_val_split(splits, config.val_fraction, config.seed) if "val" not in splits and "train" in splits else 0
    )
    link = out / IMAGES_DIR
    if (link.is_symlink() or link.exists()) and (not link.is_symlink() or link.resolve() != images_root):
        raise DatasetError(
            out, f"{link} exists and is not a link to {images_root}: move it away or choose another --out"
        )
    rebuild = rebuild_args(config)
    begin_build(out, rebuild)
    if not link.is_symlink():
        link.symlink_to(images_root, target_is_directory=True)
    names = [split for split in SPLITS if split in splits]
    for stale in set(split_files()) - set(split_files(names)):  # an earlier build's splits this source lacks
        (out / stale).unlink(missing_ok=True)
    info: dict = {
        "name": config.source_format,
        "source": {
            "format": config.source_format,
            "images": str(images_root),
            "annotations": [os.path.abspath(a) for a in config.annotations],
        },
        "seed": config.seed,
        "val_split": (
            {"drawn_from": "train", "fraction": config.val_fraction, "identities": val_drawn}
            if val_drawn
            else "official"
        ),
        "dialogues": (
            dialogue_config_dict(config.dialogue_config())
            if config.synthesise_dialogues
            else "source"
            if config.source_format == "chatpedes"
            else "round0"
        ),
        "attributes": "parsed from the captions" if config.synthesise_dialogues else None,
        "splits": {},
    }
    for split in names:
        if progress:
            print(f"writing {split}: {len(splits[split].images):,} images", flush=True)
        info["splits"][split] = write_converted_split(out, split, splits[split], config)
    validate_converted(out, names)
    return finish_build(out, info, rebuild, split_files(names))
