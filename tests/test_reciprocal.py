"""k-reciprocal re-ranking: the vectorised path against the plain one, its scores, its commands."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from minterpr.evaluation.reid import reid_metrics, reid_metrics_from_distances
from minterpr.index import reciprocal
from minterpr.index.reciprocal import ReciprocalConfig, k_reciprocal_distances, k_reciprocal_distances_reference

ROOT = Path(__file__).resolve().parents[1]


def _two_cameras(people=10, shots=4, shift=1.2, noise=0.6, seed=0):
    """Each person `shots` crops per camera; camera 1 adds one shared shift (a colour cast)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(people, 16))
    pids, cams, feats = [], [], []
    cast = shift * rng.normal(size=16)
    for p in range(people):
        for cam in (0, 1):
            for _ in range(shots):
                feats.append(centres[p] + cam * cast + noise * rng.normal(size=16))
                pids.append(str(p))
                cams.append(str(cam))
    return np.asarray(feats, np.float32), pids, cams


@pytest.mark.parametrize(
    "config",
    [
        ReciprocalConfig(),
        ReciprocalConfig(3, 1, 0.0),
        ReciprocalConfig(20, 6, 0.3, qe_k=0),
        ReciprocalConfig(4, 2, 1.0, qe_k=2, qe_alpha=1.0),
    ],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_vectorised_path_agrees_with_the_plain_one(config, seed):
    feats, _, _ = _two_cameras(people=5, shots=3, seed=seed)
    query, gallery = feats[::4], feats  # queries are also in the gallery, as in eval-reid's union
    fast = k_reciprocal_distances(query, gallery, config)
    plain = k_reciprocal_distances_reference(query, gallery, config)
    assert fast.shape == (len(query), len(gallery))
    np.testing.assert_allclose(fast, plain, atol=1e-5)


@pytest.mark.parametrize("config", [ReciprocalConfig(), ReciprocalConfig(20, 6, 0.3)])
def test_within_one_set_each_crop_once(config):
    feats, _, _ = _two_cameras(people=4, shots=3, seed=5)
    fast = k_reciprocal_distances(feats, None, config)
    assert fast.shape == (len(feats), len(feats))
    np.testing.assert_allclose(fast, k_reciprocal_distances_reference(feats, None, config), atol=1e-5)
    # the same crops given twice (as queries and as gallery) are another problem: every crop's twin
    # takes a neighbour's place
    assert not np.allclose(fast, k_reciprocal_distances(feats, feats, config), atol=1e-3)


def test_more_neighbours_asked_than_items_exist():
    feats, _, _ = _two_cameras(people=2, shots=1)
    config = ReciprocalConfig(k1=20, k2=6, lam=0.3)
    np.testing.assert_allclose(
        k_reciprocal_distances(feats[:1], feats[1:], config),
        k_reciprocal_distances_reference(feats[:1], feats[1:], config),
        atol=1e-6,
    )


def test_lambda_one_is_the_original_ranking():
    feats, _, _ = _two_cameras(seed=3)
    q, g = feats[::8], feats
    d = k_reciprocal_distances(q, g, ReciprocalConfig(lam=1.0, qe_k=0))
    cos = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (g / np.linalg.norm(g, axis=1, keepdims=True)).T
    assert (np.argsort(d, axis=1, kind="stable")[:, :5] == np.argsort(-cos, axis=1, kind="stable")[:, :5]).all()


def test_shared_neighbours_find_the_other_camera():
    # noise and a camera cast put look-alikes among a query's nearest crops, but one person's
    # crops share their neighbours with each other, and that is what re-ranking trusts
    feats, pids, cams = _two_cameras(people=30, shots=5, shift=0.8, noise=0.7, seed=0)  # plain mAP 55
    q_rows = list(range(0, len(feats), 5))  # one query per person and camera
    g_rows = [i for i in range(len(feats)) if i not in q_rows]
    q, g = feats[q_rows], feats[g_rows]
    labels = (
        [pids[i] for i in q_rows],
        [pids[i] for i in g_rows],
        [cams[i] for i in q_rows],
        [cams[i] for i in g_rows],
    )
    plain = reid_metrics(q, g, *labels)
    reranked = reid_metrics_from_distances(k_reciprocal_distances(q, g), *labels)
    assert reranked.mean_ap > plain.mean_ap + 10  # 79.0 against 55.2


def test_settings_parse_and_refuse():
    assert ReciprocalConfig.parse(" 20, 6 ,0.3") == ReciprocalConfig(20, 6, 0.3, qe_k=0, qe_alpha=0.0)
    assert ReciprocalConfig.parse("8,3,0.3,5,3") == ReciprocalConfig()
    for bad in ("20,6", "a,b,c", "20,6,0.3,1", "0,3,0.3", "8,3,1.5", "8,3,0.3,-1,3"):
        with pytest.raises(ValueError, match="K1,K2,LAMBDA|k1 >= 1"):
            ReciprocalConfig.parse(bad)


def test_too_many_items_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(reciprocal, "MAX_ITEMS", 10)
    feats, _, _ = _two_cameras(people=2, shots=3)
    with pytest.raises(ValueError, match="all 14 crops .* at most 10"):
        k_reciprocal_distances(feats[:2], feats)


def test_scores_from_distances_equal_scores_from_features():
    feats, pids, cams = _two_cameras(seed=2)
    q, g = feats[::3], feats
    labels = (pids[::3], pids, cams[::3], cams)
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    gn = g / np.linalg.norm(g, axis=1, keepdims=True)
    assert reid_metrics(q, g, *labels) == reid_metrics_from_distances(-(qn @ gn.T), *labels)


@pytest.fixture()
def tiny_reid(tmp_path):
    pytest.importorskip("torch")
    from support.datasets import make_cuhk03

    from minterpr.data.reid import read_cuhk03, write_manifest

    images = read_cuhk03(make_cuhk03(tmp_path / "cuhk03", people=8))
    write_manifest(images, tmp_path / "val.jsonl")
    return tmp_path / "val.jsonl"


def test_eval_reid_prints_and_writes_re_ranked_scores(tiny_reid, tmp_path, capsys):
    from minterpr.cli.main import main

    model = ROOT / "models" / "osnet-x0_25-reid"
    args = ["eval-reid", "--model", str(model), "--data", str(tiny_reid)]
    assert main([*args, "--rerank", "3,2,0.3", "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "re-ranked (3,2,0.3: k1, k2, lambda, query expansion k and alpha):" in out
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["reranked"]["k1"] == 3 and 0 <= report["reranked"]["mAP"] <= 100
    assert main([*args, "--rerank", "3,2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "K1,K2,LAMBDA" in err[0]


def _load_bench(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_select_rerank_chooses_on_val_and_refuses_test(tiny_reid, tmp_path, capsys):
    bench = _load_bench("select_rerank")
    model = str(ROOT / "models" / "osnet-x0_25-reid")
    out = tmp_path / "choice.json"
    assert (
        bench.main(
            [
                "--model",
                model,
                "--data",
                str(tiny_reid),
                "--k1",
                "2,3",
                "--k2",
                "1",
                "--lam",
                "0.3",
                "--qe-k",
                "0",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    choice = json.loads(out.read_text())
    assert choice["best"]["k1"] in (2, 3) and len(choice["rows"]) == 3  # plain + two settings
    test_manifest = tmp_path / "test.jsonl"
    test_manifest.write_text(tiny_reid.read_text())
    with pytest.raises(SystemExit) as stop:
        bench.main(["--model", model, "--data", str(test_manifest)])
    assert stop.value.code == 2 and "choose on val" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        bench.main(["--model", model, "--data", str(tiny_reid), "--qe-k", "five"])
    assert stop.value.code == 2 and "--qe-k: 'five' is not a comma-separated list" in capsys.readouterr().err


def test_bench_appearance_adds_a_re_ranked_line(tiny_reid, tmp_path):
    bench = _load_bench("bench_appearance")
    out = tmp_path / "rows.json"
    model = str(ROOT / "models" / "osnet-x0_25-reid")
    assert bench.main(["--data", str(tiny_reid), "--model", model, "--rerank", "default", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["embedding"] for r in rows] == [f"model:{model}", f"model:{model}+rerank:8,3,0.3,5,3"]


def test_bench_links_scores_crops_across_tracks():
    bench = _load_bench("bench_links")
    feats, pids, _ = _two_cameras(people=6, shots=3, seed=4)
    # two tracks per person (the tracker lost them once), one unlabelled track
    metadata = [{"track": 2 * int(p) + (k % 3 == 2)} for k, p in enumerate(pids)] + [{"track": 99}]
    majority = {2 * p + half: str(p) for p in range(6) for half in (0, 1)}
    vectors = np.concatenate([feats, np.ones((1, feats.shape[1]), np.float32)])
    out = bench.across_tracks(metadata, vectors, majority, [ReciprocalConfig(3, 2, 0.3)])
    assert (out["crops"], out["people"], out["tracks"]) == (len(pids), 6, 12)
    assert out["cosine"]["queries"] == len(pids)  # every crop has its person in the other track
    assert 0 <= out["rerank_3,2,0.3,5,3"]["pair_auc"] <= 100 and out["cosine"]["pair_auc"] > 50
