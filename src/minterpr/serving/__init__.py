"""The search service behind ``minterpr serve``: a JSON API and web page over galleries, cases,
sessions stored as event logs, and a hash-chained audit log (docs/service.md).

It needs the ``serve`` extra (``pip install 'minterpr[serve]'``: FastAPI, uvicorn, SQLAlchemy,
Jinja2, python-multipart); importing ``minterpr.serving.app`` without it says so. The service
layer (:mod:`~minterpr.serving.service`) is what the routes call; :func:`~minterpr.serving.app.create_app`
builds the application.
"""

from __future__ import annotations

SERVE_EXTRA = "pip install -c constraints.txt 'minterpr[serve]'"


def require_serve_packages() -> None:
    """ImportError naming the extra when FastAPI, uvicorn or SQLAlchemy is missing."""
    import importlib.util

    missing = [
        name for name in ("fastapi", "uvicorn", "sqlalchemy", "multipart") if importlib.util.find_spec(name) is None
    ]
    if missing:
        raise ImportError(f"the search service needs {', '.join(missing)}: {SERVE_EXTRA}")


require_serve_packages()
