"""SQLAlchemy 2.x tables: principals and their tokens, grants, lanes, audit events.

Times are unix seconds (float) so the injectable clock, the policy and the data plane share one
unit; the API renders them as ISO 8601. Lists (prefixes, ports) are JSON.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from viplanes.lanes import states

ROLES = ("operator", "researcher")
# The lane states are declared once, with their transitions, in viplanes/lanes/states.py.
LANE_STATES = states.STATES
LIVE_STATES = states.LIVE  # a lane in one of these holds quota, a lane-pool address and its flows


class Base(DeclarativeBase):
    pass


class Principal(Base):
    __tablename__ = "principals"
    # "alice" and "ALICE" are one principal: names are ASCII (the API's NAME pattern), so lower()
    # agrees between Python, SQLite and PostgreSQL, and this index makes the rule hold under races.
    __table_args__ = (Index("uq_principals_name_ci", text("lower(name)"), unique=True),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float)

    tokens: Mapped[list[ApiToken]] = relationship(back_populates="principal", cascade="all, delete-orphan")


class PrincipalIdentity(Base):
    """A person at an OpenID Connect provider, by (issuer, sub): the only key a provider's token
    is matched on (names change and are reused; ``sub`` is neither). See authz/oidcclaims.py."""

    __tablename__ = "principal_identities"
    __table_args__ = (UniqueConstraint("issuer", "subject", name="uq_principal_identities_issuer_subject"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    principal_id: Mapped[int] = mapped_column(ForeignKey("principals.id", ondelete="CASCADE"), index=True)
    issuer: Mapped[str] = mapped_column(String(512))
    subject: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[float] = mapped_column(Float)


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    principal_id: Mapped[int] = mapped_column(ForeignKey("principals.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 hex
    created_at: Mapped[float] = mapped_column(Float)

    principal: Mapped[Principal] = relationship(back_populates="tokens")


class Grant(Base):
    __tablename__ = "grants"
    __table_args__ = (
        CheckConstraint("(principal_id IS NULL) <> (group_name IS NULL)", name="ck_grants_principal_or_group"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # a grant names one principal, or one group at the identity provider (issue 30): every member
    # of the group, proven by a GroupMembership row that is still fresh (docs/identity.md)
    principal_id: Mapped[int | None] = mapped_column(ForeignKey("principals.id"), index=True, nullable=True)
    group_name: Mapped[str | None] = mapped_column(String(255), index=True, nullable=True)
    src_prefixes: Mapped[list] = mapped_column(JSON)
    dst_prefixes: Mapped[list] = mapped_column(JSON)
    protocols: Mapped[list] = mapped_column(JSON)
    ports: Mapped[list] = mapped_column(JSON)  # ["443", "9000-9100"]
    max_duration_s: Mapped[int] = mapped_column(Integer)
    max_rate_mbps: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_lanes: Mapped[int] = mapped_column(Integer)
    valid_from: Mapped[float | None] = mapped_column(Float, nullable=True)
    valid_until: Mapped[float | None] = mapped_column(Float, nullable=True)
    revoked_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    created_by: Mapped[str] = mapped_column(String(64))

    principal: Mapped[Principal | None] = relationship(lazy="joined")

    @property
    def holder(self) -> str:
        """Who may use the grant, for people: ``rita`` or ``group hpc-users``."""
        if self.group_name is not None:
            return f"group {self.group_name}"
        return self.principal.name if self.principal is not None else "?"


class GroupMembership(Base):
    """Evidence that a person is in a provider group, from their verified access tokens
    (viplanes/domain/memberships.py). ``until`` is the proving token's ``exp`` plus a grace, 0 once
    a token showed the group gone; ``seen_iat`` is the newest token that spoke, so an older token
    (issued before the removal) cannot bring the membership back."""

    __tablename__ = "group_memberships"

    principal_id: Mapped[int] = mapped_column(ForeignKey("principals.id", ondelete="CASCADE"), primary_key=True)
    group_name: Mapped[str] = mapped_column(String(255), primary_key=True)
    until: Mapped[float] = mapped_column(Float)
    seen_iat: Mapped[float] = mapped_column(Float)


class Lane(Base):
    __tablename__ = "lanes"
    __table_args__ = (
        UniqueConstraint("principal_id", "idempotency_key", name="uq_lanes_idempotency"),
        Index("ix_lanes_state_expires", "state", "expires_at"),
        Index("ix_lanes_principal_state", "principal_id", "state"),
        Index("ix_lanes_grant_state", "grant_id", "state"),
        Index("ix_lanes_flow", "src_ip", "dst_ip", "dst_port"),
        # Lane-pool allocation: "this host's live address" and "is this address taken" are index
        # seeks, not scans of every live lane (request latency must not grow with live lanes).
        Index("ix_lanes_src_state", "src_ip", "state"),
        Index("ix_lanes_nat_state", "nat_ip", "state"),
        # the name watcher's "which lanes' DNS answers ran out" (migration 0004)
        Index("ix_lanes_dst_refresh", "dst_refresh_at"),
        # retention: ended lanes by age (viplanes/store/retention.py, migration 0007)
        Index("ix_lanes_ended_at", "ended_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    principal_id: Mapped[int] = mapped_column(ForeignKey("principals.id"))
    grant_id: Mapped[int] = mapped_column(ForeignKey("grants.id"))
    src_ip: Mapped[str] = mapped_column(String(45))
    # the one destination address / port of a single-flow lane; NULL when the lane has a set
    dst_ip: Mapped[str | None] = mapped_column(String(45), nullable=True)
    protocol: Mapped[str] = mapped_column(String(3))
    dst_port: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # destination sets (issue 11): canonical networks ["203.0.113.5/32", "2001:db8::/64"] and
    # inclusive port ranges [[50000, 51000]]; NULL for a single-flow lane (dst_ip/dst_port say it)
    dst_nets: Mapped[list | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    dst_ports: Mapped[list | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    dst_host: Mapped[str | None] = mapped_column(String(253), nullable=True)  # name the set came from
    dst_refresh_at: Mapped[float | None] = mapped_column(Float, nullable=True)  # resolve dst_host again
    src_port: Mapped[int | None] = mapped_column(Integer, nullable=True)
    duration_s: Mapped[int] = mapped_column(Integer)
    rate_mbps: Mapped[float | None] = mapped_column(Float, nullable=True)
    purpose: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(12))
    reason: Mapped[str] = mapped_column(Text, default="")
    nat_ip: Mapped[str | None] = mapped_column(String(15), nullable=True)
    idempotency_key: Mapped[str | None] = mapped_column(String(128), nullable=True)
    # sha256 of the canonical request the key was first used with: a reuse with another body is 422
    request_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    starts_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)
    activated_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    activation_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    # automatic lanes (issue 32, migration 0010): what made the lane when nobody asked for it
    # ("sflow", "firefly"; NULL for a requested lane), the grant whose automation allowed it, and
    # the evidence as JSON text (sampled rate, or the firefly's experiment/activity and reporter)
    trigger_kind: Mapped[str | None] = mapped_column(String(16), nullable=True)
    trigger_grant_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    trigger_detail: Mapped[str | None] = mapped_column(Text, nullable=True)

    principal: Mapped[Principal] = relationship(lazy="joined")


class AuditEvent(Base):
    __tablename__ = "audit_events"
    __table_args__ = (Index("ix_audit_at", "at"), Index("ix_audit_actor_at", "actor", "at"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[float] = mapped_column(Float)
    actor: Mapped[str] = mapped_column(String(64))  # principal name, or "system" for the scheduler
    action: Mapped[str] = mapped_column(String(32))  # lane.request, grant.create, ...
    target: Mapped[str] = mapped_column(String(64), default="")  # "lane:7", "grant:2", "principal:bob"
    decision: Mapped[str] = mapped_column(String(16))  # allow | deny | done
    reason: Mapped[str] = mapped_column(Text, default="")


class AuthFailureCount(Base):
    """Failed authentications per scope ("addr:1.2.3.4", "net:1.2.3.0/24", "all") per fixed window.

    In the database so every API process on it shares one budget and a restart does not reset it.
    """

    __tablename__ = "auth_failures"

    scope: Mapped[str] = mapped_column(String(64), primary_key=True)
    window_start: Mapped[int] = mapped_column(Integer, primary_key=True)  # unix seconds
    count: Mapped[int] = mapped_column(Integer)


class ControllerLease(Base):
    """Who may drive the switches: one row per lease name, held by one controller at a time.

    ``expires_at`` is written from the database's clock (``viplanes.cluster.leader``), never a process's;
    ``epoch`` grows on every change of holder and is the OpenFlow role ``generation_id``.
    """

    __tablename__ = "controller_lease"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(128), default="")
    epoch: Mapped[int] = mapped_column(BigInteger, default=0)
    expires_at: Mapped[float] = mapped_column(Float, default=0.0)  # unix seconds, database clock


class ControllerStatus(Base):
    """The master's switch readiness for the API processes (``viplanes.cluster.reports``): JSON list
    of {name, dpid, connected, reconciled}, rewritten every second; ``reported_at`` on the
    database's clock, so its age needs no agreement between machines' clocks."""

    __tablename__ = "controller_status"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(128))
    epoch: Mapped[int] = mapped_column(BigInteger)
    switches: Mapped[str] = mapped_column(Text)
    reported_at: Mapped[float] = mapped_column(Float)


class LaneCounterRow(Base):
    """Packets/bytes of a lane as the master last read them from the switches (database clock)."""

    __tablename__ = "lane_counters"

    lane_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    packets: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)
    read_at: Mapped[float] = mapped_column(Float)


class GrantAuto(Base):
    """A grant's permission for automatic lanes (issue 32; ``viplanes.auto``). No row, or
    ``enabled`` false: the grant allows only requested lanes. The lane itself must still pass the
    grant (``policy.rules.decide``); these columns only say when a sighting may ask for one."""

    __tablename__ = "grant_auto"

    grant_id: Mapped[int] = mapped_column(ForeignKey("grants.id", ondelete="CASCADE"), primary_key=True)
    enabled: Mapped[bool] = mapped_column(Boolean, default=False)
    min_rate_mbps: Mapped[float | None] = mapped_column(Float, nullable=True)  # sampled rate over window_s
    window_s: Mapped[float] = mapped_column(Float, default=2.0)
    min_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)  # bytes within window_s
    idle_s: Mapped[int] = mapped_column(Integer, default=30)  # end after this long without traffic
    max_auto_lanes: Mapped[int] = mapped_column(Integer, default=1)  # automatic lanes at once
    fireflies: Mapped[bool] = mapped_column(Boolean, default=False)  # a scitags mark suffices
    max_duration_s: Mapped[int] = mapped_column(Integer, default=3600)  # an automatic lane's length
    updated_at: Mapped[float] = mapped_column(Float)
    updated_by: Mapped[str] = mapped_column(String(64))


class AutomationSwitch(Base):
    """The operators' global switch for automatic lanes: one row, ``name`` = "global". No row
    means on (each grant still has to allow automation)."""

    __tablename__ = "automation_switch"

    name: Mapped[str] = mapped_column(String(16), primary_key=True)
    enabled: Mapped[bool] = mapped_column(Boolean)
    changed_at: Mapped[float] = mapped_column(Float)
    changed_by: Mapped[str] = mapped_column(String(64))
