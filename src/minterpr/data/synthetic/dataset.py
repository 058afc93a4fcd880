"""The synthetic dataset: the rendered world plus its dialogues, in the dataset layout of
:mod:`minterpr.data.build` (gallery manifests, MInterPEDES files, ambiguity figures).

Example:
    >>> cfg = SyntheticDatasetConfig(world=SyntheticWorldConfig(train_identities=4, val_identities=2,
    ...                              test_identities=2, image_size=(64, 32), workers=1))
    >>> import tempfile; info = build_synthetic_dataset(tempfile.mkdtemp(), cfg, progress=False)
    >>> info["splits"]["test"]["records"] > 0
    True
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from minterpr.data.build import (DATASET_FILE, SPLITS, dialogue_config_dict, read_dataset_info, write_dataset_info,
                                 write_split)
from minterpr.data.dialogue_synthesis import DialogueSynthesisConfig
from minterpr.data.synthetic.world import SyntheticWorldConfig, build_world


@dataclass(frozen=True)
class SyntheticDatasetConfig:
    """What to render and how to write its dialogues."""

    world: SyntheticWorldConfig = field(default_factory=SyntheticWorldConfig)  # identities, cameras, images
    dialogues: DialogueSynthesisConfig = field(default_factory=DialogueSynthesisConfig)  # turns and references

    def to_dict(self) -> dict:
        world = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self.world).items()}
        return {"world": world, "dialogues": dialogue_config_dict(self.dialogues)}


def build_synthetic_dataset(out_dir: str | Path, config: SyntheticDatasetConfig | None = None, *,
                            progress: bool = True, force: bool = False) -> dict:
    """Render the world and write its dataset files into ``out_dir``; returns dataset.json's content.

    When ``out_dir`` already holds a finished build with the same settings it is reused (the
    demo's cache); ``force`` rebuilds. The same settings always give byte-identical files.
    """
    config = config or SyntheticDatasetConfig()
    out = Path(out_dir)
    if not force and (out / DATASET_FILE).is_file():
        info = read_dataset_info(out)
        if info.get("config") == config.to_dict():
            return info
    out.mkdir(parents=True, exist_ok=True)
    (out / DATASET_FILE).unlink(missing_ok=True)  # an interrupted rebuild must not look finished
    world = build_world(out, config.world, progress=progress)
    info: dict = {"name": "synthetic", "config": config.to_dict(), "splits": {}}
    for k, split in enumerate(SPLITS):
        # Each split gets its own dialogue seed so splits do not mirror each other's wording.
        dialogues = replace(config.dialogues, seed=config.dialogues.seed + k)
        info["splits"][split] = write_split(out, split, world[split], dialogues, namespace="synth")
    write_dataset_info(out, info)
    return info
