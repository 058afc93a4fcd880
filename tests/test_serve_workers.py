"""``minterpr serve --workers N``: one worker process only (the rate limits, live sessions and the
ingestion queue are in memory), refused in one line before anything is built."""

from __future__ import annotations

from minterpr.cli.main import main


def test_more_than_one_worker_is_refused_in_one_line(tmp_path, capsys):
    code = main(["serve", "--workers", "4", "--data", str(tmp_path / "state"), "--no-serve"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "--workers 4: minterpr serve runs one worker process" in err[0]
    assert not (tmp_path / "state").exists()  # refused before the state was opened


def test_one_worker_is_the_default_and_accepted(tmp_path):
    assert main(["serve", "--workers", "1", "--data", str(tmp_path / "state"), "--no-serve"]) == 0
    assert (tmp_path / "state" / "minterpr.db").is_file()
