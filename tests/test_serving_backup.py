"""`minterpr db backup` / `restore`: the database (users, cases, the audit chain), uploads and the
galleries the service built come back byte for byte in a new state folder, the audit head checked;
restoring over existing state is refused."""

from __future__ import annotations

from minterpr.cli.main import main

PASSWORD = "correct horse battery staple"


def test_backup_and_restore_all_state(tmp_path, capsys):
    from minterpr.serving.service import build_services
    from minterpr.serving.settings import ServeSettings

    state = tmp_path / "state"
    services = build_services(ServeSettings(data_dir=state))
    services.accounts.create_user("ana", PASSWORD, "analyst")
    ana = services.accounts.login("ana", PASSWORD, client="test").principal
    case = services.cases.open_case(ana, "t", "report 12, authorised by the duty officer", None, None, None)
    files = {
        "uploads/ab12.png": b"\x89PNG upload",
        "galleries/lobby/vectors.npy": b"vectors",
        "galleries/lobby/crops/0.png": b"crop",
    }
    for name, data in files.items():
        (state / name).parent.mkdir(parents=True, exist_ok=True)
        (state / name).write_bytes(data)
    head = services.audit.head()
    # the server keeps running: the backup is taken beside it
    assert main(["db", "backup", str(tmp_path / "backup"), "--data", str(state)]) == 0
    assert f"audit head {head[0]} {head[1]}" in capsys.readouterr().out
    services.close()

    restored = tmp_path / "restored"
    assert main(["db", "restore", str(tmp_path / "backup"), "--data", str(restored)]) == 0
    assert "verified" in capsys.readouterr().out
    for name, data in files.items():
        assert (restored / name).read_bytes() == data
    again = build_services(ServeSettings(data_dir=restored))
    try:
        assert again.audit.head() == head and again.audit.verify().ok
        assert again.cases.row(case.id).title == "t"
        assert again.accounts.login("ana", PASSWORD, client="test").principal.username == "ana"
    finally:
        again.close()

    assert main(["db", "restore", str(tmp_path / "backup"), "--data", str(restored)]) == 2  # not over state
    assert "restore into a new or empty state folder" in capsys.readouterr().err
    assert main(["db", "backup", str(tmp_path / "backup"), "--data", str(restored)]) == 2  # not into a backup
    assert "must be new or empty" in capsys.readouterr().err


def _state(tmp_path):
    from minterpr.serving.service import build_services
    from minterpr.serving.settings import ServeSettings

    state = tmp_path / "state"
    services = build_services(ServeSettings(data_dir=state))
    services.accounts.create_user("ana", PASSWORD, "analyst")
    services.close()
    return state


def test_a_backup_is_private_from_creation_and_so_is_a_restore(tmp_path, capsys):
    import os
    import stat

    state = _state(tmp_path)
    old = os.umask(0o022)  # a usual umask: files readable by everyone unless made otherwise
    try:
        assert main(["db", "backup", str(tmp_path / "backup"), "--data", str(state)]) == 0
        assert main(["db", "restore", str(tmp_path / "backup"), "--data", str(tmp_path / "restored")]) == 0
    finally:
        os.umask(old)
    mode = lambda path: stat.S_IMODE(path.stat().st_mode)  # noqa: E731
    assert mode(tmp_path / "backup") == 0o700
    assert mode(tmp_path / "backup" / "minterpr.db") == 0o600 and mode(tmp_path / "backup" / "manifest.json") == 0o600
    assert mode(tmp_path / "restored") == 0o700 and mode(tmp_path / "restored" / "minterpr.db") == 0o600


def test_a_backup_inside_the_state_folder_is_refused(tmp_path, capsys):
    state = _state(tmp_path)
    for inside in (state / "backups" / "today", state):
        assert main(["db", "backup", str(inside), "--data", str(state)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "inside" in err[0] and "put it elsewhere" in err[0], err
    assert not (state / "backups").exists()


def test_a_manifest_naming_a_file_outside_the_backup_is_refused_before_anything_is_written(tmp_path, capsys):
    import json

    state = _state(tmp_path)
    backup = tmp_path / "backup"
    assert main(["db", "backup", str(backup), "--data", str(state)]) == 0
    manifest = json.loads((backup / "manifest.json").read_text())
    for name in (str(state / "minterpr.db"), "../state/minterpr.db", "files"):
        (backup / "manifest.json").write_text(json.dumps({**manifest, "database": name}))
        assert main(["db", "restore", str(backup), "--data", str(tmp_path / "restored")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "not a file of the backup folder" in err[0], err
        assert not (tmp_path / "restored").exists()
    # a backup whose audit head does not match: refused, and nothing half-restored is left behind
    (backup / "manifest.json").write_text(json.dumps({**manifest, "audit_head": "0" * 64}))
    assert main(["db", "restore", str(backup), "--data", str(tmp_path / "restored")]) == 2
    assert "nothing was restored" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backup", "state"]  # no restored or temporary folder


def test_database_errors_are_one_line_exit_2_and_never_show_the_password(tmp_path, capsys):
    state = tmp_path / "state"
    state.mkdir()
    (state / "minterpr.db").write_text("not a database")
    for command in (["db", "current"], ["db", "upgrade"], ["users", "list"], ["db", "backup", str(tmp_path / "b")]):
        assert main([*command, "--data", str(state)]) == 2, command
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "file is not a database" in err[0], (command, err)
    url = "postgresql+psycopg://minterpr:hunter2-secret@127.0.0.1:1/minterpr"
    for command in (["db", "current"], ["users", "list"]):
        assert main([*command, "--data", str(tmp_path / "pg"), "--database-url", url]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "hunter2" not in err[0] and "127.0.0.1" in err[0], err


def test_upgrade_of_a_database_from_a_newer_minterpr_is_one_line(tmp_path, capsys):
    import sqlite3

    state = _state(tmp_path)
    with sqlite3.connect(state / "minterpr.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0099'")
    assert main(["db", "upgrade", "--data", str(state)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "0099" in err[0] and "newer minterpr" in err[0], err
