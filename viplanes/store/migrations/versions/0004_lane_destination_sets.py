"""Lane destination sets: address/prefix sets, port ranges, DNS names, IPv6-wide address columns

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

Existing lanes keep their one ``dst_ip``/``dst_port`` and get NULL sets, which mean "that one
address and port", so nothing is rewritten. ``dst_ip``/``dst_port`` become nullable (a lane with a
set has no single destination) and address columns widen to 45 characters for IPv6.
"""

import sqlalchemy as sa
from alembic import op

# Reflect only the table being altered: resolving its foreign keys would also reflect principals,
# whose lower(name) index SQLAlchemy cannot reflect on SQLite (an SAWarning on every new database).
NO_REFERENTS = {'resolve_fks': False}

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('lanes', schema=None, reflect_kwargs=NO_REFERENTS) as batch_op:
        batch_op.alter_column(
            'src_ip', existing_type=sa.String(length=15), type_=sa.String(length=45), existing_nullable=False
        )
        batch_op.alter_column('dst_ip', existing_type=sa.String(length=15), type_=sa.String(length=45), nullable=True)
        batch_op.alter_column('dst_port', existing_type=sa.Integer(), nullable=True)
        batch_op.add_column(sa.Column('dst_nets', sa.JSON(none_as_null=True), nullable=True))
        batch_op.add_column(sa.Column('dst_ports', sa.JSON(none_as_null=True), nullable=True))
        batch_op.add_column(sa.Column('dst_host', sa.String(length=253), nullable=True))
        batch_op.add_column(sa.Column('dst_refresh_at', sa.Float(), nullable=True))
        batch_op.create_index('ix_lanes_dst_refresh', ['dst_refresh_at'], unique=False)


def downgrade() -> None:
    # lanes with a set have no single destination to fall back to: end them first
    op.execute(
        "UPDATE lanes SET state = 'revoked', reason = 'schema downgrade: destination sets removed'"
        " WHERE dst_ip IS NULL OR dst_port IS NULL"
    )
    op.execute("UPDATE lanes SET dst_ip = '0.0.0.0' WHERE dst_ip IS NULL")
    op.execute("UPDATE lanes SET dst_port = 0 WHERE dst_port IS NULL")
    with op.batch_alter_table('lanes', schema=None, reflect_kwargs=NO_REFERENTS) as batch_op:
        batch_op.drop_index('ix_lanes_dst_refresh')
        batch_op.drop_column('dst_refresh_at')
        batch_op.drop_column('dst_host')
        batch_op.drop_column('dst_ports')
        batch_op.drop_column('dst_nets')
        batch_op.alter_column('dst_port', existing_type=sa.Integer(), nullable=False)
        batch_op.alter_column('dst_ip', existing_type=sa.String(length=45), type_=sa.String(length=15), nullable=False)
        batch_op.alter_column(
            'src_ip', existing_type=sa.String(length=45), type_=sa.String(length=15), existing_nullable=False
        )
