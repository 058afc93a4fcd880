"""0002: indexes on the case of audit entries and sessions (a case's export and its session list
read by case; without them each scans the whole table)."""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_audit_log_case_id", "audit_log", ["case_id"])
    op.create_index("ix_sessions_case_id", "sessions", ["case_id"])


def downgrade() -> None:
    op.drop_index("ix_sessions_case_id", table_name="sessions")
    op.drop_index("ix_audit_log_case_id", table_name="audit_log")
