"""0003: the request id on audit entries (``audit_log.request_id``: the ``X-Request-ID`` of the
request that wrote the entry, so an auditor can follow one request through the logs and the
chain). Entries written before it get NULL, which the chain does not hash (their hashes stay
valid). A plain ADD COLUMN on SQLite too: copying the table, as a batch alter would, drops the
triggers that keep it append-only."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("audit_log", sa.Column("request_id", sa.String(length=64), nullable=True))


def downgrade() -> None:
    op.drop_column("audit_log", "request_id")  # in place (SQLite >= 3.35): a copy would lose the triggers
