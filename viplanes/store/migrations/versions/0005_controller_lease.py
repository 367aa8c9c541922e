"""Controller lease: which controller process is master of the switches

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23

One row per lease name (``controller``). ``viplanes.cluster.leader`` takes and renews it with one
conditional UPDATE on the database's clock; ``epoch`` is the OpenFlow role generation_id.
"""

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'controller_lease',
        sa.Column('name', sa.String(length=64), nullable=False),
        sa.Column('holder', sa.String(length=128), nullable=False),
        sa.Column('epoch', sa.BigInteger(), nullable=False),
        sa.Column('expires_at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('name'),
    )


def downgrade() -> None:
    op.drop_table('controller_lease')
