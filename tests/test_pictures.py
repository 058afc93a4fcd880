"""Ranked-results strips (minterpr.evaluation.pictures), their wiring into eval / simulate / chat,
and the per-round plots' n and 95 % Wilson band (minterpr.evaluation.report)."""

from __future__ import annotations

import io
import random

import numpy as np
import pytest
from PIL import Image

from support.helpers import random_attributes
from minterpr.cli.shared.chat_loop import ChatLoop
from minterpr.cli.main import main
from minterpr.data.build import mark_dataset
from minterpr.data.formats.gallery import write_gallery
from minterpr.errors import InputError
from minterpr.evaluation.online import one_target_per_identity, simulate
from minterpr.evaluation.pictures import (
    REJECTED_COLOUR,
    SAME_IDENTITY_COLOUR,
    TARGET_COLOUR,
    RoundView,
    StripConfig,
    strip_size,
    tile_box,
    write_ranked_strip,
)
from minterpr.evaluation.picture_recorders import RankRecorder, SessionRecorder, sample_queries
from minterpr.evaluation.report import (
    EvaluationReport,
    num_queries,
    per_round_figure,
    percent_interval,
    wilson_interval,
)
from minterpr.evaluation.static import evaluate_dialogues, replay_scores
from minterpr.index.gallery_index import GalleryIndex
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.interaction.session import Session
from minterpr.types import Dialogue, GalleryImage, QATurn, ReferenceTurn, RetrievalSample

BLUE = (40, 60, 200)  # the test images' colour: neither a frame's green nor the cross's red
CONFIG = StripConfig(top_k=4, tile_width=32, tile_height=64, text_width=120, frame=4)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """40 identities x 2 images on disk (blue shades), with attributes, as a finished dataset."""
    root = tmp_path_factory.mktemp("pictures")
    rng = random.Random(3)
    gallery = []
    for pid in range(40):
        attributes = random_attributes(rng, unknown_rate=0.0)
        for view in range(2):
            path = f"p{pid:02d}_{view}.png"
            Image.new("RGB", (16, 32), (BLUE[0], BLUE[1] + pid, BLUE[2] - 20 * view)).save(root / path)
            gallery.append(GalleryImage(path, f"toy:{pid}", camera_id=f"toy:c{view}", attributes=attributes))
    write_gallery(gallery, root / "gallery_test.jsonl")
    mark_dataset(root)
    return root, gallery


def _pixel(path, xy):
    with Image.open(path) as image:
        return image.convert("RGB").getpixel(xy)


def _frame_pixel(path, row, rank, config=CONFIG):
    x0, y0, x1, y1 = tile_box(row, rank, config)
    return _pixel(path, (x0 + 1, (y0 + y1) // 2))  # on the left frame band, halfway down


def _centre_pixel(path, row, rank, config=CONFIG):
    x0, y0, x1, y1 = tile_box(row, rank, config)
    return _pixel(path, ((x0 + x1) // 2, (y0 + y1) // 2))


# ------------------------------------------------------------------------------------------ the strip
def test_strip_size_is_rows_by_columns(world, tmp_path):
    root, gallery = world
    rows = [RoundView(f"turn {r}", tuple(range(r, r + 6))) for r in range(3)]
    for n_rows in (1, 2, 3):
        for top_k in (2, 5):
            config = StripConfig(top_k=top_k, tile_width=32, tile_height=64, text_width=120, frame=4, margin=6)
            path = write_ranked_strip(
                tmp_path / f"s{n_rows}_{top_k}.png", rows[:n_rows], gallery, root=root, target=0, config=config
            )
            with Image.open(path) as image:
                assert image.size == strip_size(n_rows, config)
            width, _ = strip_size(n_rows, config)
            assert width == 2 * 6 + 120 + top_k * (6 + 32 + 2 * 4)  # text column + one cell per rank
    heights = [strip_size(n, CONFIG)[1] for n in (1, 2, 3, 4)]
    step = heights[1] - heights[0]
    assert np.diff(heights).tolist() == [step] * 3 and step > CONFIG.tile_height + 2 * CONFIG.frame


def test_target_framed_where_it_ranks_identity_lightly_rejected_crossed(world, tmp_path):
    root, gallery = world
    target = 10  # p05_0; its identity's other image is 11
    rows = [
        RoundView("a person", (3, 11, target, 7), (0.9, 0.8, 0.7, 0.6)),
        RoundView(
            "[shown p01_1.png] not her", (target, 11, 5, 3), (0.9, 0.8, 0.7, 0.6), judgements={3: False}, shown=3
        ),
    ]
    path = write_ranked_strip(tmp_path / "strip.png", rows, gallery, root=root, target=target, config=CONFIG)
    assert _frame_pixel(path, 0, 2) == TARGET_COLOUR and _frame_pixel(path, 1, 0) == TARGET_COLOUR
    assert _frame_pixel(path, 0, 1) == SAME_IDENTITY_COLOUR and _frame_pixel(path, 1, 1) == SAME_IDENTITY_COLOUR
    for row, rank in ((0, 0), (0, 3), (1, 2), (1, 3)):
        assert _frame_pixel(path, row, rank) not in (TARGET_COLOUR, SAME_IDENTITY_COLOUR)
    assert _centre_pixel(path, 1, 3) == REJECTED_COLOUR  # the cross runs through the centre
    assert _centre_pixel(path, 0, 0) != REJECTED_COLOUR  # image 3 was not yet rejected in round 0
    assert _centre_pixel(path, 1, None) == REJECTED_COLOUR  # the judged image, beside its turn's text
    x0, _, x1, _ = tile_box(1, None, CONFIG)
    assert CONFIG.margin <= x0 and x1 < tile_box(1, 0, CONFIG)[0]  # inside the text column
    # no target: nothing is framed green
    plain = write_ranked_strip(tmp_path / "plain.png", rows, gallery, root=root, config=CONFIG)
    assert all(_frame_pixel(plain, r, k) != TARGET_COLOUR for r in range(2) for k in range(4))


def test_unreadable_images_are_grey_tiles_and_bad_input_is_refused(world, tmp_path):
    root, gallery = world
    missing = [GalleryImage("nowhere.png", "toy:x"), *gallery[:3]]
    path = write_ranked_strip(tmp_path / "s.png", [RoundView("x", (0, 1, 2, 3))], missing, root=root, config=CONFIG)
    assert path.is_file()
    with pytest.raises(InputError, match="no rounds"):
        write_ranked_strip(tmp_path / "e.png", [], gallery, root=root)
    with pytest.raises(InputError, match="not a gallery index"):
        write_ranked_strip(tmp_path / "e.png", [RoundView("x", (0,))], gallery, root=root, target=len(gallery))
    with pytest.raises(InputError, match="top_k"):
        StripConfig(top_k=0)
    with pytest.raises(InputError, match="text_width"):
        StripConfig(text_width=60)
    assert not (tmp_path / "e.png").exists()


def test_sampling_is_seeded_sorted_and_bounded():
    first = sample_queries(1000, 8, seed=5)
    assert first == sample_queries(1000, 8, seed=5) and first == sorted(first) and len(set(first)) == 8
    assert first != sample_queries(1000, 8, seed=6)
    assert sample_queries(3, 8) == [0, 1, 2] and sample_queries(5, 0) == []
    with pytest.raises(InputError):
        sample_queries(5, -1)


# ------------------------------------------------------------------- what evaluations expose, unchanged
class _Toy:
    """Images embed by their identity's number on a circle; turns by the number they end with."""

    def index_images(self, images, root=None, *, progress=False):
        return GalleryIndex(list(images), np.array([_point(int(i.person_id.split(":")[1])) for i in images]), root=root)

    def encode_turns(self, turns, index):
        words = [getattr(t, "text", None) or getattr(t, "answer", None) or getattr(t, "feedback") for t in turns]
        return np.array([_point(int(w.split()[-1])) for w in words])


def _point(k):
    return np.array([np.cos(k / 3.0), np.sin(k / 3.0)], np.float32)


def test_rank_recorder_sees_the_replay_without_changing_it(world):
    _, gallery = world
    samples = [
        RetrievalSample(
            gallery[2 * k].path,
            f"toy:{k}",
            Dialogue(
                f"person {k + 1}",
                (QATurn("who?", f"person {k}"),),
                (ReferenceTurn(gallery[2 * k + 2].path, f"not this one, {k}"),),
            ),
        )
        for k in range(6)
    ]
    plain = evaluate_dialogues(_Toy(), samples, gallery, None)
    recorder = RankRecorder([1, 4], [2, 8], top_k=5)
    seen = evaluate_dialogues(_Toy(), samples, gallery, None, observe=recorder)
    assert seen.to_dict() == plain.to_dict()
    scores = replay_scores(_Toy(), samples, gallery)
    for q, target in ((1, 2), (4, 8)):
        assert len(recorder.rounds[q]) == len(scores) == 3
        for r, (ranking, top, rank) in enumerate(recorder.rounds[q]):
            row = scores[r][q]
            order = np.argsort(-row, kind="stable")  # the metrics' tie rule
            assert list(ranking) == order[:5].tolist() and top == pytest.approx(row[order[:5]].tolist())
            assert rank == order.tolist().index(target)
    views = recorder.views(4, list(samples[4].dialogue.turns()), {g.path: i for i, g in enumerate(gallery)}.get)
    assert [v.text.split(":")[0] for v in views] == ["person 5", "Q", "[shown p05_0.png] not this one, 4"]
    assert views[2].judgements == {10: False} and views[0].judgements == {}
    assert [v.shown for v in views] == [None, None, 10]  # the reference the last turn judged


def test_session_recorder_sees_the_simulation_without_changing_it(world, tmp_path):
    root, gallery = world
    backend = AttributeBackend()
    index = backend.index_images(gallery, root=str(root))
    targets = one_target_per_identity(gallery, limit=6, seed=0)
    options = dict(rounds=3, seed=0, schedule="alternate")
    plain = simulate(backend, index, targets, **options)
    picks = [0, 3]
    where = [index.index_of(targets[q].path) for q in picks]
    recorder = SessionRecorder(picks, where, top_k=4)
    seen = simulate(backend, index, targets, observe=recorder, **options)
    assert seen.to_dict() == plain.to_dict()
    for q, target in zip(picks, where):
        rows = recorder.rows[q]
        assert len(rows) == 4 and rows[0].text  # round 0 (the description) + 3 rounds
        path = write_ranked_strip(
            tmp_path / f"q{q}.png", rows, index.images, root=index.root, target=target, config=CONFIG
        )
        for r, row in enumerate(rows):
            if row.target_rank is not None and row.target_rank < CONFIG.top_k:
                assert row.ranking[row.target_rank] == target
                assert _frame_pixel(path, r, row.target_rank) == TARGET_COLOUR
            for rank, i in enumerate(row.ranking[: CONFIG.top_k]):
                if row.judgements.get(i) is False:
                    assert _centre_pixel(path, r, rank) == REJECTED_COLOUR


# -------------------------------------------------------------------------------------- the commands
def test_simulate_pictures_a_seeded_sample(world, tmp_path, capsys):
    root, _ = world
    args = [
        "simulate",
        "--backend",
        "attribute",
        "--data",
        str(root),
        "--rounds",
        "2",
        "--limit",
        "10",
        "--pictures",
        "3",
        "--pictures-top",
        "4",
        "--quiet",
    ]
    assert main([*args, "--pictures-dir", str(tmp_path / "a")]) == 0
    assert main([*args, "--pictures-dir", str(tmp_path / "b")]) == 0
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert len(names) == 3 and names == sorted(p.name for p in (tmp_path / "b").iterdir())
    assert names == [f"query_{q:05d}.png" for q in sample_queries(10, 3, 0)]
    for name in names:
        with Image.open(tmp_path / "a" / name) as image:
            assert image.size == strip_size(3, StripConfig(top_k=4))  # round 0 + 2 rounds
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert main([*args[:-3], "--pictures", "2"]) == 2  # no --pictures-dir
    assert "--pictures-dir" in capsys.readouterr().err
    # --compare: the same sample, one folder per setting
    assert main([*args, "--compare", "--pictures-dir", str(tmp_path / "c")]) == 0
    folders = sorted((tmp_path / "c").iterdir())
    assert len(folders) == 14 and all(sorted(p.name for p in f.iterdir()) == names for f in folders)
    assert "auto_info_gain_diverse" in [f.name for f in folders]


def test_chat_show_writes_the_strip_after_every_turn(world, tmp_path):
    root, gallery = world
    backend = AttributeBackend()
    session = Session(backend, backend.index_images(gallery, root=str(root)), schedule="questions")
    out = io.StringIO()
    show = tmp_path / "show"
    ChatLoop(session, out, top=2, show=show).run(io.StringIO("a woman in a red top\n:no 1 no backpack\n:undo\n"))
    text = out.getvalue()
    shown = [line.split("picture: ")[1] for line in text.splitlines() if line.startswith("picture: ")]
    assert shown == [str(show / "turn_001.png"), str(show / "turn_002.png"), str(show / "turn_001.png")]
    for name, rows in (("turn_001.png", 1), ("turn_002.png", 2)):  # one row per turn
        with Image.open(show / name) as image:
            assert image.size == strip_size(rows, StripConfig(top_k=8))
    assert "error" not in text


def test_chat_show_on_the_command_line(world, tmp_path, capsys, monkeypatch):
    root, _ = world
    monkeypatch.setattr("sys.stdin", io.StringIO("a man with a backpack\n:no 1\n"))
    assert main(["chat", "--backend", "attribute", "--images", str(root), "--show", str(tmp_path / "s")]) == 0
    printed = capsys.readouterr().out
    assert f"picture: {tmp_path / 's' / 'turn_002.png'}" in printed
    with Image.open(tmp_path / "s" / "turn_002.png") as image:
        assert image.size == strip_size(2, StripConfig(top_k=8))


# ------------------------------------------------------------------------------------ per-round plots
@pytest.mark.parametrize(
    "successes, n, low, high",
    [
        (81, 263, 0.2553, 0.3662),  # Newcombe (1998), Stat. Med. 17:857, table I, method 3
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_interval_matches_published_values(successes, n, low, high):
    lo, hi = wilson_interval(successes, n)
    assert (round(lo, 4), round(hi, 4)) == (low, high)


def test_wilson_interval_edges_and_percent_form():
    assert wilson_interval(20, 20)[1] == 1.0 and wilson_interval(20, 20)[0] == pytest.approx(1 - 0.1611, abs=1e-4)
    lo, hi = percent_interval(100 * 81 / 263, 263)
    assert (round(lo, 2), round(hi, 2)) == (25.53, 36.62)
    for bad in ((1, 0), (-1, 5), (6, 5)):
        with pytest.raises(ValueError):
            wilson_interval(*bad)


def _report(n, r1s):
    rounds = [
        {"round": r, "r1": v, "r5": v, "r10": v, "mAP": v, "mINP": v, "hits1": v, "hits10": v}
        for r, v in enumerate(r1s)
    ]
    return EvaluationReport({"num_queries": n}, rounds, bri=1.0, extra={"num_queries": n})


def test_plot_shows_n_and_a_band_per_curve():
    pytest.importorskip("matplotlib")
    reports = {"a": _report(100, [10.0, 50.0]), "b": _report(100, [20.0, 60.0])}
    ax = per_round_figure(reports, "r1").axes[0]
    assert "n = 100" in ax.get_title() and "95 % Wilson" in ax.get_title()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a (n=100)", "b (n=100)"]
    bands = ax.collections
    assert len(bands) == 2
    (lo, hi) = percent_interval(50.0, 100)
    ys = bands[0].get_paths()[0].vertices[:, 1]
    assert ys.min() == pytest.approx(percent_interval(10.0, 100)[0]) and ys.max() == pytest.approx(hi)
    mixed = per_round_figure({"a": _report(100, [10.0]), "b": _report(40, [10.0])}, "mAP").axes[0]
    assert "n =" not in mixed.get_title() and not mixed.collections  # mAP is no proportion: no band
    assert [t.get_text() for t in mixed.get_legend().get_texts()] == ["a (n=100)", "b (n=40)"]
    assert num_queries(EvaluationReport({}, _report(1, [1.0]).rounds, bri=0.0)) is None
