"""API hardening: case-insensitive principal names, idempotency request hash, shared auth-failure counts

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

Principals whose names differ only in case cannot both exist any more. If an old database holds
such rows the upgrade stops, names them, and changes nothing: which of two principals is "the real
alice" is an operator's decision (rename or disable one in the database, then upgrade again), not
one a migration should guess. Renaming silently would change who the audit log names.
"""

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


class DuplicatePrincipalNames(RuntimeError):
    pass


def _refuse_case_duplicates() -> None:
    rows = (
        op.get_bind()
        .execute(
            sa.text(
                "SELECT lower(name) AS folded, count(*) AS n FROM principals GROUP BY lower(name) HAVING count(*) > 1"
                " ORDER BY folded"
            )
        )
        .all()
    )
    if rows:
        names = (
            op.get_bind()
            .execute(
                sa.text("SELECT name FROM principals WHERE lower(name) IN :folded ORDER BY lower(name), id").bindparams(
                    sa.bindparam("folded", expanding=True)
                ),
                {"folded": [r[0] for r in rows]},
            )
            .scalars()
            .all()
        )
        raise DuplicatePrincipalNames(
            "principal names must be unique ignoring case, but these differ only in case: "
            + ", ".join(names)
            + ". Rename or remove all but one of each group, then run `viplanes db upgrade` again."
        )


def upgrade() -> None:
    _refuse_case_duplicates()
    op.create_index('uq_principals_name_ci', 'principals', [sa.text('lower(name)')], unique=True)
    with op.batch_alter_table('lanes', schema=None) as batch_op:
        batch_op.add_column(sa.Column('request_hash', sa.String(length=64), nullable=True))
    op.create_table(
        'auth_failures',
        sa.Column('scope', sa.String(length=64), nullable=False),
        sa.Column('window_start', sa.Integer(), nullable=False),
        sa.Column('count', sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint('scope', 'window_start'),
    )


def downgrade() -> None:
    op.drop_table('auth_failures')
    with op.batch_alter_table('lanes', schema=None) as batch_op:
        batch_op.drop_column('request_hash')
    op.drop_index('uq_principals_name_ci', table_name='principals')
