"""Alembic revisions of the service's schema (``minterpr db upgrade``; see :mod:`minterpr.serving.schema`)."""
