"""'Probably not in this footage' as a fitted model (interaction/presence.py,
evaluation/presence_calibration.py, ``minterpr calibrate presence``): the fast features agree with
the plain reference, the record round-trips and names what is wrong, the fit recovers known
weights, and on a small synthetic world an absent target lowers the probability more than a present one."""

from __future__ import annotations

import json

import numpy as np
import pytest

from minterpr.errors import InputError, RunError
from minterpr.evaluation.presence_calibration import (
    fit_presence,
    flag_rates,
    lowest,
    presence_searches,
    without_identity,
)
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.interaction.presence import (
    FEATURE_NAMES,
    PresenceModel,
    choose_threshold,
    fit_logistic,
    presence_features,
    presence_features_reference,
    session_features,
)
from minterpr.interaction.session import Session
from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact
from minterpr.interaction.fitted import RunExtras
from minterpr.interaction.match import MatchCalibration
from minterpr.types import GalleryImage


def _random_facts(rng: np.random.Generator, count: int) -> list[Fact]:
    out = []
    for _ in range(count):
        slot = ONTOLOGY.slots[int(rng.integers(len(ONTOLOGY.slots)))]
        names = slot.value_names
        values = tuple(str(v) for v in rng.choice(names, size=min(len(names), int(rng.integers(1, 3))), replace=False))
        out.append(Fact(slot.name, values, negated=bool(rng.random() < 0.3)))
    return out + out[:1]  # a fact said twice counts once


@pytest.mark.parametrize("seed", range(5))
def test_the_fast_features_agree_with_the_plain_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 40
    probs = rng.uniform(0.0, 1.0, (n, len(ONTOLOGY.flat_labels()))).astype(np.float32)
    facts = _random_facts(rng, int(rng.integers(0, 6)))
    rejected = rng.random(n) < 0.2
    order = rng.permutation(n)[:25]  # a shortlist: 25 of the 40 ranked
    scores = np.sort(rng.normal(0, 0.3, 25))[::-1]
    scores[-2:] = -np.inf
    ruled_out = rng.uniform(0, 1, int(rejected.sum())).tolist() + [1.0]  # 1.0 is clipped, not infinite
    for temperature in (0.02, 0.3):
        fast = presence_features(
            scores, temperature, probs, facts, rejected=rejected, ruled_out=ruled_out, order=order, floor=0.03
        )
        plain = presence_features_reference(
            scores.tolist(),
            temperature,
            probs,
            facts,
            rejected=rejected.tolist(),
            ruled_out=ruled_out,
            order=order.tolist(),
            floor=0.03,
        )
        assert fast.tolist() == pytest.approx(plain, rel=1e-9, abs=1e-9)
        assert np.isfinite(fast).all()
    assert presence_features(scores, 0.1, None, facts, rejected=rejected, ruled_out=[], order=order)[:2].tolist() == [
        0,
        0,
    ]


def _world(people: int = 24, per: int = 3, seed: int = 0) -> list[GalleryImage]:
    """People of distinct looks over five slots, several images each."""
    rng = np.random.default_rng(seed)
    slots = {
        "gender": ("male", "female"),
        "upper_colour": ("red", "blue", "green", "black", "white"),
        "lower_colour": ("black", "blue", "grey"),
        "hair_length": ("short", "long"),
        "carried": ("backpack", "handbag", "nothing"),
    }
    looks: set[tuple[str, ...]] = set()
    while len(looks) < people:
        looks.add(tuple(str(rng.choice(values)) for values in slots.values()))
    return [
        GalleryImage(f"{p}-{k}.jpg", f"x:{p}", attributes={s: (v,) for s, v in zip(slots, look)})
        for p, look in enumerate(sorted(looks))
        for k in range(per)
    ]


def test_the_session_features_are_the_features_of_its_step_and_rejections() -> None:
    backend = AttributeBackend(noise=0.5)
    index = backend.index_images(_world())
    session = Session(backend, index, match_temperature=0.1)
    session.describe("a woman in a red top")
    session.feedback(int(session.step.ranking[0]), "not her, she had long hair")
    rejected = np.array([session.judgements.get(i) is False for i in range(len(index))])
    assert rejected.sum() == 1
    expected = presence_features_reference(
        session.step.scores.tolist(),
        0.1,
        index.attribute_probs,
        session.facts,
        rejected=rejected.tolist(),
        ruled_out=[0.4],
        order=session.step.ranking.tolist(),
        floor=session.reranking.prob_floor,
    )
    assert session_features(session, [0.4]).tolist() == pytest.approx(expected)
    assert session_features(Session(backend, index), []) is None  # nothing said yet


def _model(**changes) -> PresenceModel:
    fields = dict(
        split="val",
        weights=dict(zip(FEATURE_NAMES, (0.6, 0.2, -0.1, 0.7, -0.5, -0.2))),
        bias=0.7,
        threshold=0.4,
        searches=100,
        steps=700,
        absent_flagged_pct=95.0,
        present_flagged_pct=5.0,
        protocol={"simulator": "oracle", "turns": 5, "seed": 0},
    )
    return PresenceModel(**{**fields, **changes})


def test_the_record_round_trips_through_the_run_extras_and_a_malformed_one_names_file_and_field() -> None:
    extras = RunExtras(presence=_model())
    stored = json.loads(json.dumps(extras.to_dict()))
    assert RunExtras.from_dict(stored) == extras and PresenceModel.from_dict(stored["presence_model"]) == _model()
    for field, value, said in (
        ("threshold", 1.5, "'threshold': 1.5 is not in (0, 1)"),
        ("bias", "x", "'bias': 'x' is not a finite number"),
        ("steps", -1, "'steps': -1 is not a count"),
        ("split", None, "'split': None is not a split name"),
        ("weights", [1.0], "'weights': [1.0] must map feature names to numbers"),
    ):
        bad = json.loads(json.dumps(stored))
        bad["presence_model"][field] = value
        with pytest.raises(RunError, match="malformed extra 'presence_model'") as caught:
            RunExtras.from_dict(bad, "runs/a/model.pt")
        assert str(caught.value).startswith("runs/a/model.pt: ") and said in str(caught.value)
    bad = json.loads(json.dumps(stored))
    bad["presence_model"]["weights"]["top_match"] = float("nan")
    with pytest.raises(RunError, match="'weights.top_match': nan is not a finite number"):
        RunExtras.from_dict(bad, "m.pt")
    with pytest.raises(RunError, match="m.pt: malformed extra 'presence_model': a list, not a dict"):
        RunExtras.from_dict({"presence_model": []}, "m.pt")


def test_a_record_fitted_on_other_features_is_ignored_with_a_warning_and_kept_as_written(caplog) -> None:
    older = _model().to_dict()
    older["weights"] = {"best_fit": 0.5, "rejected": -1.0}  # an older minterpr's features
    extras = RunExtras.from_dict({"presence_model": older, "epoch": 3}, "runs/b/model.pt")
    assert extras.presence is None and extras.other == {"presence_model": older, "epoch": 3}
    assert (
        "runs/b/model.pt: extra 'presence_model' ignored" in caplog.text
        and "minterpr calibrate presence" in caplog.text
    )
    assert RunExtras(presence=_model(), other=extras.other).to_dict()["presence_model"] == _model().to_dict()


def test_the_logistic_fit_recovers_known_weights_and_the_threshold_allows_the_false_flags_asked() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(0, 1, (20000, 3)) * [1.0, 2.0, 0.5] + [0.0, 1.0, -1.0]
    truth, bias = np.array([1.5, -0.5, 2.0]), 0.3
    y = rng.random(len(x)) < 1 / (1 + np.exp(-(x @ truth + bias)))
    coefficients, fitted_bias = fit_logistic(x, y, l2=0.0)
    assert coefficients.tolist() == pytest.approx(truth.tolist(), abs=0.1) and fitted_bias == pytest.approx(
        bias, abs=0.1
    )
    with pytest.raises(ValueError, match="both classes"):
        fit_logistic(x, np.ones(len(x)))
    present = np.linspace(0.3, 0.98, 20).tolist()  # 20 searches: 5 % is one
    threshold = choose_threshold(present, [0.1, 0.2], max_false=0.05)
    assert sum(p < threshold for p in present) == 1 and threshold == pytest.approx((present[0] + present[1]) / 2)
    assert choose_threshold(present, [0.1], max_false=0.0) == pytest.approx(0.15)  # under every present one
    tied = [0.3, 0.3] + present[2:]  # flagging one of two equal searches would flag both: neither
    assert sum(p < choose_threshold(tied, [0.1], max_false=0.05) for p in tied) == 0


def test_on_a_small_world_an_absent_target_lowers_the_probability_more_than_a_present_one() -> None:
    """Fit on one world, measure on another: absent targets are flagged, present ones much less."""
    backend = AttributeBackend(noise=0.5, seed=1)
    fit_index = backend.index_images(_world(seed=1))
    fitted = fit_presence(presence_searches(backend, fit_index, searches=24, turns=5), split="val")
    index = backend.index_images(_world(seed=2))
    found = presence_searches(backend, index, searches=24, turns=5, seed=3)
    present = [lowest(fitted, s) for s in found if s.present]
    absent = [lowest(fitted, s) for s in found if not s.present]
    assert np.median(absent) < np.median(present) - 0.2
    absent_pct, present_pct = flag_rates(fitted, found)
    assert absent_pct >= 60.0 and present_pct <= 25.0 and absent_pct > present_pct + 40.0
    assert fitted.weights["best_fit"] > 0  # fitting the facts well says "present"


def test_how_many_look_alikes_outfit_the_target_is_counted_for_present_searches_only() -> None:
    """With exact attribute readings (noise 0) the target fits everything said at least as well as
    anyone: nobody out-fits it; with noisy readings some present searches have look-alikes ahead."""
    exact = AttributeBackend(noise=0.0)
    found = presence_searches(exact, exact.index_images(_world(seed=4)), searches=8, turns=2)
    assert all(s.outfitted_by is None for s in found if not s.present)
    assert [s.outfitted_by for s in found if s.present] == [0] * 8
    noisy = AttributeBackend(noise=1.5, seed=2)
    found = presence_searches(noisy, noisy.index_images(_world(seed=4)), searches=8, turns=2)
    assert any(s.outfitted_by for s in found if s.present)


def test_searches_without_the_target_search_without_its_images_and_fitting_needs_both_kinds() -> None:
    backend = AttributeBackend()
    index = backend.index_images(_world(people=6))
    assert {im.person_id for im in without_identity(index, "x:2").images} == {f"x:{p}" for p in range(6)} - {"x:2"}
    found = presence_searches(backend, index, searches=3, turns=2)
    with pytest.raises(InputError, match="present and absent"):
        fit_presence([s for s in found if s.present], split="val")
    from minterpr.evaluation.presence_calibration import calibrate_presence

    with pytest.raises(InputError, match="never on test"):
        calibrate_presence(backend, index, split="test")


def test_the_command_fits_on_val_stores_the_record_and_refuses_test(
    tmp_path, tiny_run, capsys, one_torch_thread
) -> None:
    import random
    import shutil

    from PIL import Image

    from minterpr.cli.main import main
    from minterpr.data.build import mark_dataset
    from minterpr.data.formats.gallery import write_gallery
    from minterpr.data.formats.minterpedes import write_minterpedes
    from minterpr.types import Dialogue, QATurn, RetrievalSample
    from minterpr.runtime.run import load_run
    from support.helpers import random_attributes

    rng = random.Random(2)
    gallery = []
    for pid in range(8):
        attributes = random_attributes(rng, unknown_rate=0.0)
        for view in range(2):
            Image.new("RGB", (16, 32), (30 * pid, 90, 70 * view)).save(tmp_path / f"p{pid}_{view}.png")
            gallery.append(GalleryImage(f"p{pid}_{view}.png", f"toy:{pid}", attributes=attributes))
    write_gallery(gallery, tmp_path / "gallery_val.jsonl")
    write_minterpedes(
        [RetrievalSample("p0_0.png", "minterpedes:0", Dialogue("a person", (QATurn("Bag?", "no"),)))],
        tmp_path / "val.jsonl",
    )
    mark_dataset(tmp_path)
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    assert (
        main(
            [
                "calibrate",
                "presence",
                "--run",
                str(run),
                "--data",
                str(tmp_path),
                "--searches",
                "6",
                "--turns",
                "2",
                "--json",
                "-",
                "-q",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    record = PresenceModel.from_dict(json.loads(printed[printed.index("{") :]))
    assert record.split == "val" and record.searches == 2 + 3 + 6 and load_run(run).extras.presence == record
    assert main(["calibrate", "presence", "--run", str(run), "--data", str(tmp_path), "--split", "test"]) == 2
    assert "minterpr calibrate presence: error: --split test" in capsys.readouterr().err
    # the earlier name, which the model card gives, is the same command
    assert (
        main(
            [
                "calibrate-presence",
                "--run",
                str(run),
                "--data",
                str(tmp_path),
                "--searches",
                "6",
                "--turns",
                "2",
                "--dry-run",
                "--json",
                "-",
                "-q",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert PresenceModel.from_dict(json.loads(printed[printed.index("{") :])) == record
    # `calibrate match` is the other subcommand of the group: same options, its own record
    assert (
        main(
            [
                "calibrate",
                "match",
                "--run",
                str(run),
                "--data",
                str(tmp_path),
                "--searches",
                "3",
                "--turns",
                "2",
                "--json",
                "-",
                "-q",
            ]
        )
        == 0
    )
    printed, said = capsys.readouterr()  # --json -: the JSON on stdout, the console line on stderr
    assert "match temperature fitted on val" in said and f"stored in {run / 'model.pt'}" in said
    assert load_run(run).extras.match == MatchCalibration.from_dict(json.loads(printed[printed.index("{") :]))


def _with_looks(index, seed: int = 0):
    """The index with appearance vectors: each person's crops near one random direction, calibrated."""
    from minterpr.interaction.appearance import fit_same_person
    from minterpr.runtime.appearance import with_appearance

    rng = np.random.default_rng(seed)
    people = sorted({im.person_id for im in index.images})
    centres = {p: rng.normal(size=16) for p in people}
    vectors = np.stack([centres[im.person_id] + 0.4 * rng.normal(size=16) for im in index.images])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    calibration = fit_same_person(vectors, [im.person_id for im in index.images], split="val")
    return with_appearance(index, vectors.astype(np.float32), calibration)


def test_appearance_adds_the_one_person_feature_and_a_model_fitted_with_it_needs_it() -> None:
    backend = AttributeBackend(noise=0.5, seed=1)
    plain = backend.index_images(_world(seed=1))
    index = _with_looks(plain)
    found = presence_searches(backend, index, searches=12, turns=3)
    assert all(s.rows.shape[1] == len(FEATURE_NAMES) + 1 for s in found)
    fitted = fit_presence(found, split="val")
    assert fitted.names == (*FEATURE_NAMES, "one_person")
    assert PresenceModel.from_dict(json.loads(json.dumps(fitted.to_dict()))) == fitted
    row = found[0].rows[0]
    assert 0.0 <= row[-1] <= 9.0  # at most LEADERS - 1 images can be the leader's person
    with pytest.raises(ValueError, match="appearance"):
        fitted.probability(row[:-1])  # a gallery without appearance vectors
    without = fit_presence(presence_searches(backend, plain, searches=12, turns=3), split="val")
    assert without.probability(row) == without.probability(row[:-1])  # fitted without it: ignored
