"""Controller reports: what the master controller sees, published for the API processes

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23

``controller_status``: one row per lease name, rewritten every second by the master with its
switches' readiness (JSON list of {name, dpid, connected, reconciled}) and the database's time.
``lane_counters``: per-lane packets/bytes the master read from the switches, with the time read
(database clock). Both are written by ``viplanes.cluster.reports`` and read by ``viplanes.cluster.handoff``.
"""

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'controller_status',
        sa.Column('name', sa.String(length=64), nullable=False),
        sa.Column('holder', sa.String(length=128), nullable=False),
        sa.Column('epoch', sa.BigInteger(), nullable=False),
        sa.Column('switches', sa.Text(), nullable=False),
        sa.Column('reported_at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('name'),
    )
    op.create_table(
        'lane_counters',
        sa.Column('lane_id', sa.Integer(), nullable=False),
        sa.Column('packets', sa.BigInteger(), nullable=False),
        sa.Column('bytes', sa.BigInteger(), nullable=False),
        sa.Column('read_at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('lane_id'),
    )


def downgrade() -> None:
    op.drop_table('lane_counters')
    op.drop_table('controller_status')
