"""Automatic lanes: grant_auto, automation_switch, and the trigger columns of lanes

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26

Issue 32. A grant may allow automatic lanes (grant_auto); operators switch automation off for
everyone at once (automation_switch); a lane records what triggered it.
"""

import sqlalchemy as sa
from alembic import op

# Reflect only the table being altered: resolving its foreign keys would also reflect principals,
# whose lower(name) index SQLAlchemy cannot reflect on SQLite (an SAWarning on every new database).
NO_REFERENTS = {'resolve_fks': False}

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'grant_auto',
        sa.Column('grant_id', sa.Integer(), nullable=False),
        sa.Column('enabled', sa.Boolean(), nullable=False),
        sa.Column('min_rate_mbps', sa.Float(), nullable=True),
        sa.Column('window_s', sa.Float(), nullable=False),
        sa.Column('min_bytes', sa.BigInteger(), nullable=True),
        sa.Column('idle_s', sa.Integer(), nullable=False),
        sa.Column('max_auto_lanes', sa.Integer(), nullable=False),
        sa.Column('fireflies', sa.Boolean(), nullable=False),
        sa.Column('max_duration_s', sa.Integer(), nullable=False),
        sa.Column('updated_at', sa.Float(), nullable=False),
        sa.Column('updated_by', sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(['grant_id'], ['grants.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('grant_id'),
    )
    op.create_table(
        'automation_switch',
        sa.Column('name', sa.String(length=16), nullable=False),
        sa.Column('enabled', sa.Boolean(), nullable=False),
        sa.Column('changed_at', sa.Float(), nullable=False),
        sa.Column('changed_by', sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint('name'),
    )
    with op.batch_alter_table('lanes', reflect_kwargs=NO_REFERENTS) as batch:
        batch.add_column(sa.Column('trigger_kind', sa.String(length=16), nullable=True))
        batch.add_column(sa.Column('trigger_grant_id', sa.Integer(), nullable=True))
        batch.add_column(sa.Column('trigger_detail', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('lanes', reflect_kwargs=NO_REFERENTS) as batch:
        batch.drop_column('trigger_detail')
        batch.drop_column('trigger_grant_id')
        batch.drop_column('trigger_kind')
    op.drop_table('automation_switch')
    op.drop_table('grant_auto')
