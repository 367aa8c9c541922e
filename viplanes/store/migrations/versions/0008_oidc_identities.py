"""OpenID Connect people: principal_identities maps (issuer, sub) to a principal

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26

A principal is created the first time a provider's token for a new subject arrives; this table
keeps the link so a later token of the same person finds the same principal even after a rename
at the provider (lead: renumber this file if another 0008 lands first).
"""

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'principal_identities',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('principal_id', sa.Integer(), nullable=False),
        sa.Column('issuer', sa.String(length=512), nullable=False),
        sa.Column('subject', sa.String(length=255), nullable=False),
        sa.Column('created_at', sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(['principal_id'], ['principals.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('issuer', 'subject', name='uq_principal_identities_issuer_subject'),
    )
    op.create_index('ix_principal_identities_principal_id', 'principal_identities', ['principal_id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_principal_identities_principal_id', table_name='principal_identities')
    op.drop_table('principal_identities')
