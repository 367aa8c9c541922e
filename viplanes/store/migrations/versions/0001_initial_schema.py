"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'audit_events',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('at', sa.Float(), nullable=False),
        sa.Column('actor', sa.String(length=64), nullable=False),
        sa.Column('action', sa.String(length=32), nullable=False),
        sa.Column('target', sa.String(length=64), nullable=False),
        sa.Column('decision', sa.String(length=16), nullable=False),
        sa.Column('reason', sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('audit_events', schema=None) as batch_op:
        batch_op.create_index('ix_audit_actor_at', ['actor', 'at'], unique=False)
        batch_op.create_index('ix_audit_at', ['at'], unique=False)

    op.create_table(
        'principals',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('name', sa.String(length=64), nullable=False),
        sa.Column('role', sa.String(length=16), nullable=False),
        sa.Column('disabled', sa.Boolean(), nullable=False),
        sa.Column('created_at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('name'),
    )
    op.create_table(
        'api_tokens',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('principal_id', sa.Integer(), nullable=False),
        sa.Column('token_hash', sa.String(length=64), nullable=False),
        sa.Column('created_at', sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(['principal_id'], ['principals.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('token_hash'),
    )
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_api_tokens_principal_id'), ['principal_id'], unique=False)

    op.create_table(
        'grants',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('principal_id', sa.Integer(), nullable=False),
        sa.Column('src_prefixes', sa.JSON(), nullable=False),
        sa.Column('dst_prefixes', sa.JSON(), nullable=False),
        sa.Column('protocols', sa.JSON(), nullable=False),
        sa.Column('ports', sa.JSON(), nullable=False),
        sa.Column('max_duration_s', sa.Integer(), nullable=False),
        sa.Column('max_rate_mbps', sa.Float(), nullable=True),
        sa.Column('max_lanes', sa.Integer(), nullable=False),
        sa.Column('valid_from', sa.Float(), nullable=True),
        sa.Column('valid_until', sa.Float(), nullable=True),
        sa.Column('revoked_at', sa.Float(), nullable=True),
        sa.Column('created_at', sa.Float(), nullable=False),
        sa.Column('created_by', sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ['principal_id'],
            ['principals.id'],
        ),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('grants', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_grants_principal_id'), ['principal_id'], unique=False)

    op.create_table(
        'lanes',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('principal_id', sa.Integer(), nullable=False),
        sa.Column('grant_id', sa.Integer(), nullable=False),
        sa.Column('src_ip', sa.String(length=15), nullable=False),
        sa.Column('dst_ip', sa.String(length=15), nullable=False),
        sa.Column('protocol', sa.String(length=3), nullable=False),
        sa.Column('dst_port', sa.Integer(), nullable=False),
        sa.Column('src_port', sa.Integer(), nullable=True),
        sa.Column('duration_s', sa.Integer(), nullable=False),
        sa.Column('rate_mbps', sa.Float(), nullable=True),
        sa.Column('purpose', sa.Text(), nullable=False),
        sa.Column('state', sa.String(length=12), nullable=False),
        sa.Column('reason', sa.Text(), nullable=False),
        sa.Column('nat_ip', sa.String(length=15), nullable=True),
        sa.Column('idempotency_key', sa.String(length=128), nullable=True),
        sa.Column('created_at', sa.Float(), nullable=False),
        sa.Column('starts_at', sa.Float(), nullable=False),
        sa.Column('expires_at', sa.Float(), nullable=False),
        sa.Column('activated_at', sa.Float(), nullable=True),
        sa.Column('ended_at', sa.Float(), nullable=True),
        sa.Column('activation_ms', sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ['grant_id'],
            ['grants.id'],
        ),
        sa.ForeignKeyConstraint(
            ['principal_id'],
            ['principals.id'],
        ),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('principal_id', 'idempotency_key', name='uq_lanes_idempotency'),
    )
    with op.batch_alter_table('lanes', schema=None) as batch_op:
        batch_op.create_index('ix_lanes_flow', ['src_ip', 'dst_ip', 'dst_port'], unique=False)
        batch_op.create_index('ix_lanes_grant_state', ['grant_id', 'state'], unique=False)
        batch_op.create_index('ix_lanes_principal_state', ['principal_id', 'state'], unique=False)
        batch_op.create_index('ix_lanes_state_expires', ['state', 'expires_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('lanes', schema=None) as batch_op:
        batch_op.drop_index('ix_lanes_state_expires')
        batch_op.drop_index('ix_lanes_principal_state')
        batch_op.drop_index('ix_lanes_grant_state')
        batch_op.drop_index('ix_lanes_flow')

    op.drop_table('lanes')
    with op.batch_alter_table('grants', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_grants_principal_id'))

    op.drop_table('grants')
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_tokens_principal_id'))

    op.drop_table('api_tokens')
    op.drop_table('principals')
    with op.batch_alter_table('audit_events', schema=None) as batch_op:
        batch_op.drop_index('ix_audit_at')
        batch_op.drop_index('ix_audit_actor_at')

    op.drop_table('audit_events')
