"""Batch gallery embedding: the local executor equals Pipeline.index_images, resumes after a kill
(a shard without its marker is redone, the others are not touched), reports unreadable images,
refuses another job's folder; the Ray Data executor (a local ray.init(num_cpus=2)) gives the same
result as the local one."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from PIL import Image

from minterpr.runtime.batch_embed import JOB_FILE, embed_gallery
from minterpr.errors import DatasetError, InputError
from minterpr.models import create_model, save_model
from minterpr.runtime.pipeline import load_pipeline

pytestmark = pytest.mark.usefixtures("one_torch_thread")
N_IMAGES = 11
BAD = {"img03.png": b"not a png", "img08.png": None}  # a corrupt file and a missing one


@pytest.fixture(scope="module")
def gallery(tmp_path_factory):
    """A tiny run and 11 images of which 2 cannot be read."""
    base = tmp_path_factory.mktemp("batch")
    save_model(create_model("tiny"), base / "run" / "model.pt")
    root = base / "images"
    root.mkdir()
    rng = np.random.default_rng(0)
    names = [f"img{i:02d}.png" for i in range(N_IMAGES)]
    for name in names:
        if name in BAD:
            if BAD[name] is not None:
                (root / name).write_bytes(BAD[name])
            continue
        Image.fromarray(rng.integers(0, 255, (40, 20, 3), dtype=np.uint8)).save(root / name)
    return base / "run", names, root


def test_local_equals_index_images_and_reports_unreadable(gallery, tmp_path):
    run, names, root = gallery
    result = embed_gallery(run, names, root, tmp_path / "out", shard_size=4, batch_size=3, progress=False)
    reference = load_pipeline(run).index_images(names, root=str(root), progress=False)
    assert [i.path for i in result.images] == [i.path for i in reference.images]
    assert [p for p, _ in result.skipped] == sorted(BAD) and result.skipped == reference.skipped
    np.testing.assert_allclose(result.embeddings, reference.embeddings, atol=1e-5)
    np.testing.assert_allclose(result.attribute_probs, reference.attribute_probs, atol=1e-5)
    assert len(result.to_gallery_index(str(root))) == N_IMAGES - len(BAD)
    assert sorted(p.name for p in (tmp_path / "out").glob("*.done")) == [f"shard-0000{s}.done" for s in range(3)]


def test_resume_redoes_only_unmarked_shards(gallery, tmp_path):
    run, names, root = gallery
    out = tmp_path / "out"
    first = embed_gallery(run, names, root, out, shard_size=4, progress=False)
    (out / "shard-00001.done").unlink()  # killed while writing shard 1
    np.save(out / "shard-00001.emb.npy", np.zeros((1, 1)))  # and its half-written array
    np.save(out / "shard-00002.emb.npy", np.load(out / "shard-00002.emb.npy") + 1)  # a marked shard, changed
    second = embed_gallery(run, names, root, out, shard_size=4, progress=False)
    np.testing.assert_array_equal(second.embeddings[:4], first.embeddings[:4])  # shard 1 redone
    np.testing.assert_allclose(second.embeddings[-1], first.embeddings[-1] + 1)  # shard 2 not recomputed
    third = embed_gallery(run, names, root, out, shard_size=4, progress=False, resume=False)
    np.testing.assert_array_equal(third.embeddings, first.embeddings)  # resume=False redoes everything


def test_refusals(gallery, tmp_path):
    run, names, root = gallery
    out = tmp_path / "out"
    embed_gallery(run, names[:3], root, out, shard_size=2, progress=False)
    with pytest.raises(InputError, match="another embedding job"):
        embed_gallery(run, names[:4], root, out, shard_size=2, progress=False)
    with pytest.raises(InputError, match="listed twice"):
        embed_gallery(run, [names[0], names[0]], root, tmp_path / "o2", progress=False)
    with pytest.raises(InputError, match="executor must be one of"):
        embed_gallery(run, names, root, tmp_path / "o3", executor="spark", progress=False)
    with pytest.warns(DeprecationWarning, match="executor"), pytest.raises(InputError, match="executor"):
        embed_gallery(run, names, root, tmp_path / "o3", engine="spark", progress=False)  # the old keyword
    with pytest.raises(InputError, match="shard_size"):
        embed_gallery(run, names, root, tmp_path / "o3", shard_size=0, progress=False)
    (out / "shard-00000.probs.npy").write_bytes(b"garbage")
    with pytest.raises(DatasetError, match="shard 0 is marked done but unreadable"):
        embed_gallery(run, names[:3], root, out, shard_size=2, progress=False)
    assert json.loads((out / JOB_FILE).read_text())["images"] == 3


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    os.environ.setdefault("RAY_DATA_DISABLE_PROGRESS_BARS", "1")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_executor_equals_local_and_resumes(gallery, tmp_path, ray_local):
    """One Ray run (actor start-up is slow): it resumes the local executor's folder, where shard 0 is
    done and shards 1 and 2 lost their markers, and ends with the local result."""
    run, names, root = gallery
    out = tmp_path / "out"
    local = embed_gallery(run, names, root, out, shard_size=4, batch_size=3, progress=False)
    for s in (1, 2):
        (out / f"shard-0000{s}.done").unlink()
    stamp = (out / "shard-00000.emb.npy").stat().st_mtime_ns
    remote = embed_gallery(
        run, names, root, out, executor="ray", shard_size=4, batch_size=3, num_actors=2, progress=False
    )
    assert (out / "shard-00000.emb.npy").stat().st_mtime_ns == stamp  # a finished shard is not redone
    assert sorted(p.name for p in out.glob("*.done")) == [f"shard-0000{s}.done" for s in range(3)]
    assert [i.path for i in remote.images] == [i.path for i in local.images]
    assert remote.skipped == local.skipped
    np.testing.assert_allclose(remote.embeddings, local.embeddings, atol=1e-5)
    np.testing.assert_allclose(remote.attribute_probs, local.attribute_probs, atol=1e-5)
