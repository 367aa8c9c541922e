"""Retention: an index on lanes.ended_at

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26

``viplanes.store.retention`` deletes ended lanes by age (``ended_at < cutoff``, oldest first, in
batches). Without an index each batch scanned every ended lane, the bulk of the table.
"""

from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_lanes_ended_at', 'lanes', ['ended_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_lanes_ended_at', table_name='lanes')
