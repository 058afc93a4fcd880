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
    files = {"uploads/ab12.png": b"\x89PNG upload", "galleries/lobby/vectors.npy": b"vectors",
             "galleries/lobby/crops/0.png": b"crop"}
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
