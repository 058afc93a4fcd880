"""The audit trail and retention: a hash chain of logins, queries, results shown, feedback,
confirmations and exports that an auditor exports and verifies (any edited or removed entry is
found), that the database refuses to change, and retention that purges sessions, crops and embeddings."""

from __future__ import annotations

import io
import json
import os
import shutil

import pytest
from fastapi.testclient import TestClient

from support.serving import login, open_case, prepare, shared_world

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return shared_world(tmp_path_factory)


@pytest.fixture()
def searched(world, tmp_path):
    """A service where ana searched to a confirmed match and exported it; the auditor's client."""
    from minterpr.serving.app import create_app

    services = prepare(tmp_path / "state", *world)
    client = TestClient(create_app(services.settings, services))
    with client:
        headers = login(client, "ana")
        case = open_case(client, headers)
        sid = client.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()[
            "session_id"
        ]
        view = client.post(f"/api/sessions/{sid}/describe", json={"text": "a woman in red"}, headers=headers).json()
        client.post(
            f"/api/sessions/{sid}/feedback",
            json={"gallery_index": view["results"][1]["gallery_index"], "text": "not her, shorter hair"},
            headers=headers,
        )
        client.post(
            f"/api/sessions/{sid}/confirm",
            json={"gallery_index": view["results"][0]["gallery_index"], "acknowledge": True},
            headers=headers,
        )
        assert client.post(f"/api/sessions/{sid}/export", headers=headers).status_code == 200
        auditor = TestClient(client.app)
        login(auditor, "aud")
        yield services, auditor, sid, case


def test_the_chain_records_every_kind_of_move(searched):
    services, auditor, sid, case = searched
    response = auditor.get("/api/audit/export")
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/x-ndjson")
    entries = [json.loads(line) for line in response.text.splitlines()]
    actions = [e["action"] for e in entries]
    for action in (
        "user_create",
        "gallery_register",
        "login",
        "case_open",
        "session_start",
        "query",
        "results_shown",
        "feedback",
        "confirm",
        "export",
        "audit_export",
    ):
        assert action in actions, action
    assert entries[-1]["action"] == "audit_export" and response.headers["X-Audit-Head"] == entries[-1]["hash"]
    query = next(e for e in entries if e["action"] == "query")
    assert query["case"] == case and query["user"] == "ana" and query["details"]["text"] == "a woman in red"
    shown = next(e for e in entries if e["action"] == "results_shown")
    assert len(shown["details"]["results"]) == 10 and shown["details"]["session"] == sid
    assert [e["seq"] for e in entries] == list(range(1, len(entries) + 1))
    assert all(b["prev"] == a["hash"] for a, b in zip(entries, entries[1:]))
    assert auditor.get("/api/audit/verify").json()["ok"] is True


def test_audit_entries_carry_the_request_id_of_the_request_that_wrote_them(world, tmp_path):
    """The X-Request-ID a client sent (or the one made for it, echoed in the response) is stored
    with every entry its request wrote — the moves, the results shown, a refusal — and is hashed:
    changing or dropping it breaks the chain. What the command line writes has none."""
    from minterpr.serving.app import create_app
    from minterpr.serving.audit import verify_lines

    services = prepare(tmp_path / "state", *world)
    with TestClient(create_app(services.settings, services)) as client:
        headers = login(client, "ana")
        case = open_case(client, {**headers, "X-Request-ID": "case-open-1"})
        start = client.post(
            "/api/sessions",
            json={"case_id": case, "gallery": "test"},
            headers={**headers, "X-Request-ID": "not a safe id <x>"},
        )
        made = start.headers["X-Request-ID"]
        assert made != "not a safe id <x>" and len(made) == 32
        sid = start.json()["session_id"]
        turn = client.post(
            f"/api/sessions/{sid}/describe",
            json={"text": "a woman in red"},
            headers={**headers, "X-Request-ID": "turn:1"},
        )
        assert turn.status_code == 200 and turn.headers["X-Request-ID"] == "turn:1"
        refused = client.post(
            "/api/admin/users",
            json={"username": "eve", "password": "x" * 20, "role": "admin"},
            headers={**headers, "X-Request-ID": "escalate.1"},
        )
        assert refused.status_code == 403
        services.audit.append_as("os:operator", "user_create", {"username": "zed"})  # as `minterpr users add`
        entries = services.audit.entries(limit=1000)
    by_request: dict = {}
    for entry in entries:
        by_request.setdefault(entry["request"], []).append(entry["action"])
    assert by_request["case-open-1"] == ["case_open"]
    assert "session_start" in by_request[made]
    assert set(by_request["turn:1"]) >= {"query", "results_shown"}
    assert by_request["escalate.1"] == ["refused"]
    assert entries[-1]["request"] is None and entries[0]["request"] is None  # the CLI's and the set-up's
    lines = list(services.audit.export_lines())
    assert verify_lines(lines).ok and all('"request":' in line for line in lines)
    k = next(i for i, e in enumerate(entries) if e["request"] == "turn:1")
    for forged in ({**entries[k], "request": "turn:2"}, {**entries[k], "request": None}):
        tampered = lines[:k] + [json.dumps(forged) + "\n"] + lines[k + 1 :]
        assert (
            verify_lines(tampered).problems[0] == f"line {k + 1} (seq {k + 1}): hash does not match the entry (edited)"
        )
    old_export = [json.dumps({key: value for key, value in e.items() if key != "request"}) for e in entries[:1]]
    assert verify_lines(old_export).ok  # an export made before entries had the field still verifies
    services.close()


def _verify(path, head=None) -> tuple[int, str]:
    from minterpr.cli.commands.audit import cmd_verify
    from minterpr.cli.main import build_parser

    out = io.StringIO()
    argv = ["audit", "verify", str(path)] + (["--head", head] if head else [])
    return cmd_verify(build_parser().parse_args(argv), out), out.getvalue()


def test_verify_finds_any_edited_or_removed_entry(searched, tmp_path):
    _, auditor, _, _ = searched
    response = auditor.get("/api/audit/export")
    lines = response.text.splitlines(keepends=True)
    head = response.headers["X-Audit-Head"]
    original = tmp_path / "audit.jsonl"
    original.write_text("".join(lines))
    assert _verify(original, head) == (0, f"{original}: {len(lines)} entries, head {head}: intact\n")
    for k in range(len(lines)):  # every single entry edited, and every single entry removed, is found
        entry = json.loads(lines[k])
        entry["details"] = {**entry["details"], "edited": True}
        edited = tmp_path / "edited.jsonl"
        edited.write_text("".join(lines[:k] + [json.dumps(entry) + "\n"] + lines[k + 1 :]))
        code, text = _verify(edited, head)
        assert code == 1 and f"line {k + 1} (seq {k + 1}): hash does not match the entry (edited)" in text
        removed = tmp_path / "removed.jsonl"
        removed.write_text("".join(lines[:k] + lines[k + 1 :]))
        code, text = _verify(removed, head)
        assert code == 1 and "NOT intact" in text, k
    swapped = lines[:2] + [lines[3], lines[2]] + lines[4:]
    (tmp_path / "swapped.jsonl").write_text("".join(swapped))
    assert _verify(tmp_path / "swapped.jsonl")[0] == 1
    # recomputing the hashes after an edit fools the file alone, not the head kept elsewhere
    from minterpr.serving.audit import entry_hash

    forged, prev = [], "0" * 64
    for k, line in enumerate(lines):
        entry = json.loads(line)
        if k == 5:
            entry["user"] = "someone else"
        entry["prev"] = prev
        entry["hash"] = prev = entry_hash(entry)
        forged.append(json.dumps(entry) + "\n")
    (tmp_path / "forged.jsonl").write_text("".join(forged))
    assert _verify(tmp_path / "forged.jsonl")[0] == 0
    code, text = _verify(tmp_path / "forged.jsonl", head)
    assert code == 1 and "is not the expected head" in text


def test_the_database_refuses_to_change_or_delete_entries(searched):
    from sqlalchemy import text
    from sqlalchemy.exc import DatabaseError

    services, _, _, _ = searched
    for statement in ("UPDATE audit_log SET user = 'x' WHERE seq = 2", "DELETE FROM audit_log WHERE seq = 3"):
        with pytest.raises(DatabaseError, match="append-only"):
            with services.db.write() as tx:
                tx.execute(text(statement))
    assert services.audit.verify().ok


def test_retention_purges_old_sessions_crops_and_embeddings(world, tmp_path, capsys):
    from minterpr.cli.main import build_parser
    from minterpr.cli.commands.serve import cmd_serve
    from minterpr.index.store.gallery_store import load_gallery, open_gallery, save_gallery
    from minterpr.index.store.store_vectors import build_vector_index
    from minterpr.serving.db import SearchSession
    from minterpr.serving.errors import ApiError
    from minterpr.serving.galleries import parse_time
    from minterpr.serving.retention import purge
    from minterpr.serving.service import build_services
    from support.serving import PASSWORD, settings

    run, store = world  # copied: the shared store must not change
    crops = tmp_path / "crops"
    shutil.copytree(store.parent / "crops", crops)
    stored = open_gallery(store)
    index = load_gallery(store, mmap=False)
    index.root = str(crops)
    fingerprint = stored.manifest.model_fingerprint
    vectors = build_vector_index("exact", index, stored.metadata, model_fingerprint=fingerprint)
    save_gallery(
        index, tmp_path / "owned", model_fingerprint=fingerprint, vector_index=vectors, metadata=stored.metadata
    )
    services = build_services(settings(tmp_path / "state"))
    services.accounts.create_user("ana", PASSWORD, "analyst")
    services.galleries.register("owned", tmp_path / "owned", run, managed=True)  # its crops are the service's
    ana = services.accounts.login("ana", PASSWORD, client="test").principal
    case = services.cases.open_case(ana, "t", "report 12, authorised by the duty officer", None, None, None)
    sessions = {}
    for name, judged in (("old", 20), ("kept", 17), ("named_purged", 1)):
        sid = services.search.start(ana, case.id, "owned").session_id
        services.search.describe(ana, sid, "a man in a red jacket")
        services.search.feedback(ana, sid, judged, "not him")
        sessions[name] = sid
    uploads = services.settings.uploads_dir / sessions["old"]
    uploads.mkdir(parents=True)
    (uploads / "x.png").write_bytes(b"png")
    # "now" is 10 days after 08:35 on the first day: images p0..p3 (but p3's 08:36) are older
    cutoff = parse_time("2026-03-02T08:35:00Z")
    with services.db.write() as tx:
        for name, sid in sessions.items():
            tx.get(SearchSession, sid).updated = cutoff - 60 if name == "old" else cutoff + 86400
    report = purge(services, 10, by="test", clock=cutoff + 10 * 86400)
    assert (report.sessions, report.events, report.uploads, report.images, report.galleries) == (1, 2, 1, 11, ["owned"])
    assert not uploads.exists()
    left = open_gallery(tmp_path / "owned", expected_fingerprint=fingerprint)
    assert len(left.index) == 13 and len(left.vectors) == 13
    assert min(parse_time(m["time"]) for m in left.metadata) >= cutoff
    assert sorted(p.name for p in crops.iterdir() if p.is_file()) == sorted(image.path for image in left.index.images)
    with pytest.raises(ApiError, match="no session"):
        services.search.view(ana, sessions["old"])
    kept = services.search.view(ana, sessions["kept"])  # continues over the rewritten store, by image path
    assert kept.turns == 2 and kept.gallery_size == 13 and len(kept.results) == 10
    assert kept.timeline[1].gallery_index == 17  # as it was recorded
    with pytest.raises(ApiError, match="removed by retention") as gone:
        services.search.view(ana, sessions["named_purged"])
    assert gone.value.status == 410
    actions = [e["action"] for e in services.audit.entries(limit=1000)]
    assert actions[-1] == "retention_purge" and services.audit.verify().ok
    services.close()
    args = build_parser().parse_args(
        ["serve", "--data", str(tmp_path / "state"), "--retention-days", "3650", "--purge"]
    )
    assert cmd_serve(args) == 0
    assert '"sessions": 0' in capsys.readouterr().out


def _uploaded_videos(services, now: float, ages: dict[str, int], jobs: dict[str, tuple[str, int]]) -> dict:
    """Videos in the upload folder, each ``ages[name]`` days old, and for ``jobs[name] = (status, days)``
    an ingestion job reading it whose status was last updated ``days`` ago; returns the paths by name."""
    from minterpr.serving.db import IngestJob

    folder = services.settings.video_uploads_dir
    folder.mkdir(parents=True)
    files = {name: folder / name for name in ages}
    for name, path in files.items():
        path.write_bytes(b"video")
        os.utime(path, (now - ages[name] * 86400, now - ages[name] * 86400))
    with services.db.write() as tx:
        for job, (name, (status, days)) in enumerate(jobs.items()):
            when = now - days * 86400
            tx.add(
                IngestJob(
                    id=f"{job:032x}",
                    gallery="g",
                    source=str(files[name]),
                    options={},
                    user_id=1,
                    status=status,
                    progress={},
                    message="",
                    created=when,
                    updated=when,
                )
            )
    return files


def test_retention_removes_old_uploaded_videos_unless_a_job_reads_them(tmp_path):
    from minterpr.serving.retention import purge
    from minterpr.serving.service import build_services
    from support.serving import settings

    services = build_services(settings(tmp_path / "state"))
    now = 1_800_000_000.0
    ages = {"old.mp4": 40, "busy.mp4": 40, "done.mp4": 40, ".upload-x.avi": 40, "new.mp4": 1}
    files = _uploaded_videos(services, now, ages, {"busy.mp4": ("running", 0), "done.mp4": ("done", 0)})
    report = purge(services, 30, by="test", clock=now)
    assert report.videos == 3  # old, done (its job ended) and the stray partial upload
    assert sorted(p.name for p in files["old.mp4"].parent.iterdir()) == ["busy.mp4", "new.mp4"]
    assert purge(services, 30, by="test", clock=now).videos == 0  # nothing left to remove
    services.close()


def test_retention_keeps_the_video_of_a_resumable_job_and_audits_each_removed_one(tmp_path):
    from minterpr.serving.retention import purge
    from minterpr.serving.service import build_services
    from support.serving import settings

    services = build_services(settings(tmp_path / "state"))
    now = 1_800_000_000.0
    stopped = {  # status, and days since the job stopped
        "failed.mp4": ("failed", 2),
        "cancelled.mp4": ("cancelled", 29),
        "interrupted.mp4": ("interrupted", 0),  # the server stopped during it: it resumes
        "forgotten.mp4": ("failed", 31),  # nobody resumed it for longer than the retention
    }
    files = _uploaded_videos(services, now, {name: 40 for name in stopped}, stopped)
    seen = services.audit.entries(limit=1000)
    report = purge(services, 30, by="test", clock=now)
    assert report.videos == 1
    assert sorted(p.name for p in files["failed.mp4"].parent.iterdir()) == [
        "cancelled.mp4",
        "failed.mp4",
        "interrupted.mp4",
    ]
    written = services.audit.entries(after=seen[-1]["seq"] if seen else 0)
    assert [(e["action"], e["user"], e["details"]) for e in written[:-1]] == [
        ("video_expired", "test", {"file": "forgotten.mp4"})
    ]
    assert written[-1]["action"] == "retention_purge" and written[-1]["details"]["videos"] == 1
    assert services.audit.verify().ok
    services.close()
