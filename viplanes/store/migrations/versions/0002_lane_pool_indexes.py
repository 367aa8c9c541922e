"""lane-pool indexes: lanes(src_ip, state) and lanes(nat_ip, state)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('lanes', schema=None) as batch_op:
        batch_op.create_index('ix_lanes_src_state', ['src_ip', 'state'], unique=False)
        batch_op.create_index('ix_lanes_nat_state', ['nat_ip', 'state'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('lanes', schema=None) as batch_op:
        batch_op.drop_index('ix_lanes_nat_state')
        batch_op.drop_index('ix_lanes_src_state')
