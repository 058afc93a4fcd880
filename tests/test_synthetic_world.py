"""The synthetic pedestrian world: identities, cameras, renderer and world builder."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from minterpr.language.ontology import ONTOLOGY
from minterpr.data.synthetic import (
    SyntheticWorldConfig,
    build_world,
    make_cameras,
    make_sample_grid,
    plan_world,
    render_grid,
    render_person,
    sample_identity,
    sample_look,
    sample_population,
    sample_population_with_twins,
)
from minterpr.data.synthetic.twins import TWIN_SLOTS
from minterpr.types import split_person_id

TINY = SyntheticWorldConfig(
    seed=7, train_identities=20, val_identities=6, test_identities=8, image_size=(128, 64), workers=2
)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.jpg"))}


@pytest.fixture(scope="module")
def tiny_world(tmp_path_factory):
    root = tmp_path_factory.mktemp("world2")
    return root, build_world(root, TINY, progress=False)


# ---- identities ---------------------------------------------------------------------------


def test_identities_set_every_slot_and_are_valid():
    rng = np.random.default_rng(0)
    for _ in range(300):
        attrs = sample_identity(rng)
        assert set(attrs) == set(ONTOLOGY.slot_names)
        assert ONTOLOGY.validate(dict(attrs)) == attrs
        assert 1 <= len(attrs["upper_colour"]) <= 2


def test_identity_correlations_look_like_real_data():
    people = sample_population(3000, np.random.default_rng(1), twin_fraction=0.0)

    def p(cond, given=lambda a: True):
        pool = [a for a in people if given(a)]
        return sum(cond(a) for a in pool) / len(pool)

    female = lambda a: a["gender"] == ("female",)  # noqa: E731
    male = lambda a: a["gender"] == ("male",)  # noqa: E731
    assert p(lambda a: a["hair_length"] == ("long",), female) > p(lambda a: a["hair_length"] == ("long",), male) + 0.4
    skirt = lambda a: a["lower_type"][0] in ("short_skirt", "long_skirt", "dress")  # noqa: E731
    assert p(female, skirt) > 0.9
    assert p(lambda a: a["lower_type"] == ("suit_trousers",), lambda a: a["upper_type"] == ("suit",)) > 0.7
    assert p(lambda a: a["footwear_type"] == ("leather_shoes",), lambda a: a["upper_type"] == ("suit",)) > 0.5
    assert p(lambda a: a["sleeve_length"] == ("short",), lambda a: a["upper_type"] == ("tshirt",)) > 0.8
    assert p(lambda a: a["sleeve_length"] == ("long",), lambda a: a["upper_type"][0] in ("jacket", "suit")) == 1.0
    assert p(lambda a: a["sleeve_length"] == ("sleeveless",), lambda a: a["upper_type"] == ("vest",)) == 1.0
    assert p(lambda a: a["lower_length"] == ("long",), lambda a: a["lower_type"][0] in ("jeans", "trousers")) == 1.0
    assert p(lambda a: a["lower_length"] == ("short",), lambda a: a["lower_type"][0] in ("shorts", "hot_pants")) == 1.0
    grey = lambda a: a["hair_colour"][0] in ("grey", "white")  # noqa: E731
    assert p(grey, lambda a: a["age"] == ("senior",)) > p(grey, lambda a: a["age"] == ("young",)) + 0.3
    colours = Counter(c for a in people for c in a["upper_colour"])
    total = sum(colours.values())
    assert (colours["black"] + colours["white"] + colours["grey"] + colours["blue"]) / total > 0.5
    assert (colours["pink"] + colours["purple"] + colours["orange"]) / total < 0.15
    carried = Counter(a["carried"][0] for a in people)
    assert (carried["nothing"] + carried["backpack"] + carried["messenger_bag"]) / len(people) > 0.65
    assert carried["umbrella"] + carried["suitcase"] < 0.08 * len(people)
    assert p(lambda a: a["headwear"] == ("none",)) > 0.75 and p(lambda a: a["accessories"] == ("none",)) > 0.6


def test_population_is_deterministic_and_seed_dependent():
    a = sample_population(50, np.random.default_rng(3))
    assert a == sample_population(50, np.random.default_rng(3))
    assert a != sample_population(50, np.random.default_rng(4))


def test_near_twins_differ_in_exactly_one_visible_slot():
    people, twin_of = sample_population_with_twins(200, np.random.default_rng(5), twin_fraction=0.3)
    twins = [i for i, t in enumerate(twin_of) if t is not None]
    assert len(twins) == 60
    assert len({twin_of[i] for i in twins}) == 60  # each original has one twin
    for i in twins:
        diff = [s for s in ONTOLOGY.slot_names if people[i][s] != people[twin_of[i]][s]]
        assert len(diff) == 1 and diff[0] in TWIN_SLOTS, diff
        assert ONTOLOGY.validate(dict(people[i])) == people[i]


# ---- cameras and renderer ---------------------------------------------------------------------


def test_cameras_are_distinct_and_cover_the_scene_types():
    cams = make_cameras(6, np.random.default_rng(0), jpeg_quality=(70, 90))
    assert Counter(c.background for c in cams) == {"street": 2, "corridor": 2, "grass": 2}
    assert len({(c.gains, c.blur_sigma) for c in cams}) == 6
    for c in cams:
        assert 70 <= c.jpeg_quality[0] <= c.jpeg_quality[1] <= 90
        assert abs(sum(c.view_probs) - 1.0) < 1e-9


def _quiet_camera():
    cam = make_cameras(3, np.random.default_rng(11))[0]
    return dataclasses.replace(cam, occlusion_prob=0.0)


def _base(**over):
    attrs = sample_identity(np.random.default_rng(2))
    attrs.update(
        {
            "upper_type": ("tshirt",),
            "upper_pattern": ("plain",),
            "upper_colour": ("grey",),
            "carried": ("nothing",),
            "accessories": ("none",),
            "hair_length": ("short",),
            "lower_type": ("trousers",),
            "lower_colour": ("grey",),
            "lower_length": ("long",),
            "lower_pattern": ("plain",),
        }
    )
    attrs.update(over)
    return attrs


def _pair(slot_values: dict, other_values: dict, view: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    cam = _quiet_camera()
    a, b = _base(**slot_values), _base(**other_values)
    look = sample_look(a, np.random.default_rng(seed))
    # same generator state: same pose, crop and camera noise; only the labelled slot differs
    img_a = render_person(a, view=view, camera=cam, rng=np.random.default_rng(seed), look=look)
    img_b = render_person(b, view=view, camera=cam, rng=np.random.default_rng(seed), look=look)
    return np.asarray(img_a, dtype=np.float64), np.asarray(img_b, dtype=np.float64)  # (H, W, 3) each


def _changed(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float]:
    """Pixels the label change altered, and their mean row as a fraction of the height."""
    mask = np.abs(a - b).sum(axis=2) > 40  # (H, W)
    rows = np.nonzero(mask)[0]
    return mask, float(rows.mean() / a.shape[0]) if rows.size else -1.0


@pytest.mark.parametrize("view", ["front", "back", "side"])
def test_renderer_draws_the_labelled_top_colour(view):
    for seed in range(4):
        red, blue = _pair({"upper_colour": ("red",)}, {"upper_colour": ("blue",)}, view, seed)
        mask, row = _changed(red, blue)
        assert mask.mean() > 0.05 and 0.3 < row < 0.62, (seed, mask.mean(), row)  # the torso changed
        r, b = red[mask].mean(axis=0), blue[mask].mean(axis=0)  # (3,) mean RGB of the changed pixels
        assert r[0] > r[2] + 60 and b[2] > b[0] + 40, (seed, r, b)
        # and in a fixed box on the upper body, as a viewer would look at it
        box = (slice(int(0.43 * red.shape[0]), int(0.52 * red.shape[0])), slice(None))
        rb, bb = red[box][mask[box]].mean(axis=0), blue[box][mask[box]].mean(axis=0)
        assert rb[0] - rb[2] > bb[0] - bb[2] + 60


def test_renderer_draws_the_labelled_bottoms_colour_and_backpack():
    for seed in range(4):
        white, black = _pair({"lower_colour": ("white",)}, {"lower_colour": ("black",)}, "front", seed)
        mask, row = _changed(white, black)
        assert mask.mean() > 0.04 and row > 0.55, (seed, row)  # the legs changed
        assert white[mask].mean() > black[mask].mean() + 100
        pack, none = _pair({"carried": ("backpack",)}, {"carried": ("nothing",)}, "back", seed)
        mask, row = _changed(pack, none)
        assert mask.mean() > 0.03 and 0.25 < row < 0.6, (seed, mask.mean(), row)  # a block on the back
        straps, _ = _changed(*_pair({"carried": ("backpack",)}, {"carried": ("nothing",)}, "front", seed))
        assert 0.0 < straps.mean() < mask.mean()  # from the front only the straps and the top show


def test_render_person_size_determinism_and_errors():
    cam = _quiet_camera()
    attrs = _base()
    img = render_person(attrs, view="front", camera=cam, rng=np.random.default_rng(0), size=(96, 48))
    assert img.size == (48, 96) and img.mode == "RGB"
    again = render_person(attrs, view="front", camera=cam, rng=np.random.default_rng(0), size=(96, 48))
    assert np.array_equal(np.asarray(img), np.asarray(again))
    with pytest.raises(ValueError, match="unknown view"):
        render_person(attrs, view="top", camera=cam, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="unknown value"):
        render_person({**attrs, "upper_colour": ("mauve",)}, view="front", camera=cam, rng=np.random.default_rng(0))


# ---- world ----------------------------------------------------------------------------------


def test_world_is_byte_identical_across_worker_counts_and_seed_dependent(tiny_world, tmp_path):
    root, _ = tiny_world
    one = tmp_path / "one"
    build_world(one, dataclasses.replace(TINY, workers=1), progress=False)
    assert _files(root) == _files(one)
    other = tmp_path / "other"
    build_world(other, dataclasses.replace(TINY, seed=8, workers=1), progress=False)
    assert _files(other) != _files(root)


def test_world_images_and_labels(tiny_world):
    root, world = tiny_world
    plan = plan_world(TINY)
    assert {s: len(plan.identities[s]) for s in world} == {"train": 20, "val": 6, "test": 8}
    ids = {s: {g.person_id for g in imgs} for s, imgs in world.items()}
    assert len(ids["train"]) == 20 and len(ids["val"]) == 6 and len(ids["test"]) == 8
    assert not (ids["train"] & ids["val"] or ids["train"] & ids["test"] or ids["val"] & ids["test"])
    cams: dict[str, set[str]] = {}
    for split, imgs in world.items():
        for g in imgs:
            assert re.fullmatch(rf"images/{split}/\d{{5}}_c\d_\d\.jpg", g.path)
            assert split_person_id(g.person_id)[0] == "synth" and g.camera_id.startswith("synth:cam")
            assert g.view in ("front", "back", "side")
            assert ONTOLOGY.validate(dict(g.attributes)) == g.attributes
            cams.setdefault(g.person_id, set()).add(g.camera_id)
            with Image.open(root / g.path) as img:
                assert img.format == "JPEG" and img.size == (64, 128)
    assert all(len(c) >= 2 for c in cams.values())
    lo, hi = TINY.images_per_identity
    per_id = Counter(g.person_id for imgs in world.values() for g in imgs)
    assert all(lo <= n <= hi for n in per_id.values())


def test_world_keeps_near_twins_within_each_split():
    plan = plan_world(TINY)
    for split in ("train", "val", "test"):
        people, twin_of = plan.identities[split], plan.twin_of[split]
        assert sum(t is not None for t in twin_of) == round(len(people) * TINY.twin_fraction)
        for i, t in enumerate(twin_of):
            if t is not None:
                assert sum(people[i][s] != people[t][s] for s in ONTOLOGY.slot_names) == 1


def test_world_config_is_checked(tmp_path):
    with pytest.raises(ValueError, match="cameras"):
        plan_world(dataclasses.replace(TINY, cameras=1))
    with pytest.raises(ValueError, match="images_per_identity"):
        plan_world(dataclasses.replace(TINY, images_per_identity=(1, 3)))


def test_grids(tiny_world, tmp_path):
    root, world = tiny_world
    out = render_grid(world["test"][:6], root, 3, tmp_path / "grid.png", tile_size=(64, 32))
    with Image.open(out) as img:
        assert img.size == (3 * 32, 2 * (64 + 14))
    sample = make_sample_grid(tmp_path / "sample.png", seed=1, identities=4, size=(64, 32))
    with Image.open(sample) as img:
        assert img.size == (8 * 32, 1 * (64 + 14))
