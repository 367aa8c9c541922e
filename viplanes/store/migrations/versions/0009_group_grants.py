"""Group grants: a grant names a principal or a provider group; membership evidence per person

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26

``grants.principal_id`` becomes nullable and ``grants.group_name`` is added: a grant names exactly
one of the two (a CHECK says so). ``group_memberships`` holds, per person and group, until when
their access tokens prove the membership (viplanes/domain/memberships.py). Existing grants keep
their principal and no group, so nothing is rewritten. SQLite rebuilds ``grants``, which lanes
point at: env.py checks the foreign keys once at the end instead of at the drop (lead: renumber if another 0009 lands first).
"""

import sqlalchemy as sa
from alembic import op

# Reflect only the table being altered: resolving its foreign keys would also reflect principals,
# whose lower(name) index SQLAlchemy cannot reflect on SQLite (an SAWarning on every new database).
NO_REFERENTS = {'resolve_fks': False}

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('grants', schema=None, reflect_kwargs=NO_REFERENTS) as batch_op:
        batch_op.alter_column('principal_id', existing_type=sa.Integer(), nullable=True)
        batch_op.add_column(sa.Column('group_name', sa.String(length=255), nullable=True))
        batch_op.create_index('ix_grants_group_name', ['group_name'], unique=False)
        batch_op.create_check_constraint(
            'ck_grants_principal_or_group', '(principal_id IS NULL) <> (group_name IS NULL)'
        )
    op.create_table(
        'group_memberships',
        sa.Column('principal_id', sa.Integer(), nullable=False),
        sa.Column('group_name', sa.String(length=255), nullable=False),
        sa.Column('until', sa.Float(), nullable=False),
        sa.Column('seen_iat', sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(['principal_id'], ['principals.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('principal_id', 'group_name'),
    )


def downgrade() -> None:
    op.drop_table('group_memberships')
    n = op.get_bind().execute(sa.text("SELECT count(*) FROM grants WHERE group_name IS NOT NULL")).scalar()
    if n:  # they have no principal to fall back to; lanes refer to them
        raise RuntimeError(f"{n} group grants exist; a schema before 0009 cannot hold them")
    with op.batch_alter_table('grants', schema=None, reflect_kwargs=NO_REFERENTS) as batch_op:
        batch_op.drop_constraint('ck_grants_principal_or_group', type_='check')
        batch_op.drop_index('ix_grants_group_name')
        batch_op.drop_column('group_name')
        batch_op.alter_column('principal_id', existing_type=sa.Integer(), nullable=False)
