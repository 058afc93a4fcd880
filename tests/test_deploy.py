"""docs/deploy: the service's Dockerfile and its compose file with PostgreSQL. The compose file's
structure is checked here (and by `docker compose config` where Docker Compose exists); the image
is built only where MINTERPR_TEST_DOCKER_BUILD=1 and a Docker daemon answers (it downloads torch)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")
DEPLOY = Path(__file__).resolve().parents[1] / "docs" / "deploy"
COMPOSE = DEPLOY / "service.compose.yml"
DOCKERFILE = DEPLOY / "Dockerfile"


def test_the_compose_file_runs_the_service_on_postgres_with_its_state_in_volumes():
    spec = yaml.safe_load(COMPOSE.read_text())
    db, service = spec["services"]["db"], spec["services"]["minterpr"]
    assert db["image"].startswith("postgres:") and "healthcheck" in db
    assert "POSTGRES_PASSWORD" not in db["environment"] and db["environment"]["POSTGRES_PASSWORD_FILE"]
    assert service["depends_on"]["db"]["condition"] == "service_healthy"
    assert service["build"]["dockerfile"] == "docs/deploy/Dockerfile"
    assert (DEPLOY / service["build"]["context"] / service["build"]["dockerfile"]).resolve() == DOCKERFILE
    assert service["environment"]["MINTERPR_DATA_DIR"] == "/data"
    assert any(v.split(":")[1].split()[0] == "/data" for v in service["volumes"])
    assert "MINTERPR_DATABASE_URL" in " ".join(service["entrypoint"]) and "/run/secrets/db_password" in " ".join(
        service["entrypoint"]
    )  # the URL is built from the secret, not written in the file
    assert all(p.startswith("127.0.0.1:") for p in service["ports"])
    for name in ("db", "state"):
        assert name in spec["volumes"]
    assert set(spec["secrets"]) == {"db_password"}
    from minterpr.serving.config import setting_types

    known = {"MINTERPR_" + name.upper() for name in setting_types()}
    for name, body in spec["services"].items():
        for variable in body.get("environment") or {}:
            assert variable.startswith("POSTGRES_") or variable in known, (name, variable)


def test_the_dockerfile_honours_the_constraints_runs_as_a_user_and_checks_health():
    text = DOCKERFILE.read_text()
    assert "-c constraints.txt" in text and "COPY pyproject.toml constraints.txt" in text
    assert "download.pytorch.org/whl/cpu" in text  # CPU torch only
    users = [line.split()[1] for line in text.splitlines() if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    assert 'VOLUME ["/data"]' in text and "MINTERPR_DATA_DIR=/data" in text
    assert "HEALTHCHECK" in text and "/healthz" in text
    # the shipped models travel with the image, where MINTERPR_MODELS finds them
    assert "COPY models ./models" in text and "MINTERPR_MODELS=/app/models" in text
    # bare gallery names of a CLI ingest inside the container land in the volume, beside the service's
    assert "MINTERPR_GALLERIES=/data/galleries" in text


def _compose() -> list[str] | None:
    """``docker compose`` (v2), else ``docker-compose`` (v1, Debian's package), else None."""
    for command in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(command[0]) is None:
            continue
        if subprocess.run([*command, "version"], capture_output=True, text=True).returncode == 0:
            return command
    return None


def test_docker_compose_accepts_the_file(tmp_path):
    compose = _compose()
    if compose is None:
        pytest.skip("neither docker compose nor docker-compose is available")
    secret = DEPLOY / "db_password.txt"
    made = not secret.exists()
    if made:
        secret.write_text("for the config check only\n")
    try:
        result = subprocess.run([*compose, "-f", str(COMPOSE), "config", "--quiet"], capture_output=True, text=True)
    finally:
        if made:
            secret.unlink()
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(os.environ.get("MINTERPR_TEST_DOCKER_BUILD") != "1", reason="MINTERPR_TEST_DOCKER_BUILD is not 1")
def test_the_image_builds():
    result = subprocess.run(
        ["docker", "build", "-f", str(DOCKERFILE), "-t", "minterpr:test", str(DEPLOY.parents[1])],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
