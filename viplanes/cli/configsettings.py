"""The configuration file's settings that are environment variables: one key for a value that
several commands (or no command option at all) read from the environment.

Why environment variables: the modules that read them (retention, rate limits, DNS, the lab)
stay the single source of truth for their defaults and checks; the file only supplies a value
where the environment has none, so an env var still overrides the file (docs/configuration.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from viplanes.domain.urls import redact_url


@dataclass(frozen=True)
class EnvSetting:
    """``[table] key`` of the file, exported as ``env`` when the environment does not set it."""

    table: str
    key: str
    env: str
    kind: type  # str, int or float: what the TOML value must be
    default: str  # shown by `config show` and the docs; the reading module owns the real one
    help: str
    secret: bool = False


ENV_SETTINGS: tuple[EnvSetting, ...] = (
    EnvSetting(
        "db", "url", "VIPLANES_DB_URL", str, "sqlite:///./viplanes.db", "database of every command", secret=True
    ),
    EnvSetting("pki", "dir", "VIPLANES_PKI", str, "", "OpenFlow PKI directory (ca.crt, controller.crt/.key)"),
    EnvSetting("pki", "deny_list", "VIPLANES_SWITCH_DENY_LIST", str, "PKI_DIR/denied-switches", "switch deny-list"),
    EnvSetting("client", "api_url", "VIPLANES_API_URL", str, "http://127.0.0.1:8080", "API the CLI talks to"),
    EnvSetting("client", "token", "VIPLANES_TOKEN", str, "", "the CLI's bearer token", secret=True),
    EnvSetting(
        "client", "ca_file", "VIPLANES_CA_FILE", str, "the system store", "CA bundle the CLI checks the API against"
    ),
    EnvSetting("retention", "lane_days", "VIPLANES_LANE_RETENTION_DAYS", float, "90", "keep ended lanes (0: keep)"),
    EnvSetting("retention", "audit_days", "VIPLANES_AUDIT_RETENTION_DAYS", float, "365", "keep audit events"),
    EnvSetting("retention", "export_dir", "VIPLANES_RETENTION_EXPORT_DIR", str, "./viplanes-archive", "export dir"),
    EnvSetting("retention", "every_s", "VIPLANES_PRUNE_EVERY_S", float, "3600", "prune period, seconds (0: off)"),
    EnvSetting("auth", "max_failures", "VIPLANES_AUTH_MAX_FAILURES", int, "10", "failed logins per address"),
    EnvSetting("auth", "net_max_failures", "VIPLANES_AUTH_NET_MAX_FAILURES", int, "50", "per /24 or /64"),
    EnvSetting("auth", "global_max_failures", "VIPLANES_AUTH_GLOBAL_MAX_FAILURES", int, "500", "in all"),
    EnvSetting("auth", "window_s", "VIPLANES_AUTH_WINDOW_S", int, "60", "failure window, seconds"),
    EnvSetting("auth", "token_cache_ttl_s", "VIPLANES_TOKEN_CACHE_TTL", float, "5", "token cache, seconds (0: off)"),
    EnvSetting("ui", "secret", "VIPLANES_UI_SECRET", str, "a per-process secret", "signs console cookies", secret=True),
    EnvSetting("ui", "session_s", "VIPLANES_UI_SESSION_S", int, "28800", "console sign-in lifetime, seconds"),
    EnvSetting("oidc", "issuer", "VIPLANES_OIDC_ISSUER", str, "none (OIDC off)", "OpenID Connect issuer URL"),
    EnvSetting("oidc", "audience", "VIPLANES_OIDC_AUDIENCE", str, "", "the API's audience in access tokens"),
    EnvSetting("oidc", "groups_claim", "VIPLANES_OIDC_GROUPS_CLAIM", str, "groups", "claim holding the groups"),
    EnvSetting("oidc", "group_roles", "VIPLANES_OIDC_GROUP_ROLES", str, "", "group=role,... (operator, researcher)"),
    EnvSetting("oidc", "membership_grace_s", "VIPLANES_OIDC_MEMBERSHIP_GRACE_S", float, "30", "group proof past exp"),
    EnvSetting("oidc", "membership_sweep_s", "VIPLANES_OIDC_MEMBERSHIP_SWEEP_S", float, "10", "lapsed-group sweep, s"),
    EnvSetting("oidc", "cli_client_id", "VIPLANES_OIDC_CLI_CLIENT_ID", str, "viplanes-cli", "`viplanes login` client"),
    EnvSetting(
        "oidc", "client_id", "VIPLANES_OIDC_CLIENT_ID", str, "none (console sign-in off)", "the console's client"
    ),
    EnvSetting(
        "oidc", "client_secret", "VIPLANES_OIDC_CLIENT_SECRET", str, "", "the console's client secret", secret=True
    ),
    EnvSetting("oidc", "client_secret_file", "VIPLANES_OIDC_CLIENT_SECRET_FILE", str, "", "file holding it (0600)"),
    EnvSetting("oidc", "display_name", "VIPLANES_OIDC_DISPLAY_NAME", str, "campus sign-in", "\"Sign in with ...\""),
    EnvSetting(
        "oidc", "redirect_uri", "VIPLANES_OIDC_REDIRECT_URI", str, "from the request", "URL of /ui/login/callback"
    ),
    EnvSetting("oidc", "scope", "VIPLANES_OIDC_SCOPE", str, "openid profile email", "scopes the console asks for"),
    EnvSetting("lanes", "max_matches", "VIPLANES_MAX_LANE_MATCHES", int, "64", "matches one lane may need"),
    EnvSetting("dns", "server", "VIPLANES_DNS_SERVER", str, "the system resolver", "resolver for lane names"),
    EnvSetting("dns", "ttl_floor_s", "VIPLANES_DNS_TTL_FLOOR_S", int, "30", "shortest re-resolve window"),
    EnvSetting("dns", "ttl_cap_s", "VIPLANES_DNS_TTL_CAP_S", int, "3600", "longest re-resolve window"),
    EnvSetting("auto", "firefly_port", "VIPLANES_FIREFLY_PORT", int, "0", "scitags firefly UDP port (0: off; 10514)"),
    EnvSetting("auto", "firefly_host", "VIPLANES_FIREFLY_HOST", str, "0.0.0.0", "firefly listen address"),
    EnvSetting("auto", "firefly_rate", "VIPLANES_FIREFLY_RATE", float, "5", "fireflies per source per second"),
    EnvSetting("auto", "queue", "VIPLANES_AUTO_QUEUE", int, "256", "sightings waiting for the acceptor"),
    EnvSetting("auto", "idle_check_s", "VIPLANES_AUTO_IDLE_CHECK_S", float, "1", "idle-end check period, s"),
    EnvSetting(
        "auto", "nat_takeover", "VIPLANES_AUTO_NAT_TAKEOVER", int, "1", "take over running NAT'd flows (0: refuse)"
    ),
    EnvSetting(
        "auto", "nat_watch_s", "VIPLANES_AUTO_NAT_WATCH_S", float, "0.8", "watch before a NAT takeover, s (0.1-2)"
    ),
    EnvSetting(
        "auto", "nat_hold_s", "VIPLANES_AUTO_NAT_HOLD_S", float, "0.5", "unpaired NAT'd sighting waits, s (0-2)"
    ),
    EnvSetting(
        "switches", "learn_features", "VIPLANES_LEARN_SWITCH_FEATURES", int, "0", "ask TABLE/METER_FEATURES (1: on)"
    ),
    EnvSetting(
        "switches", "ct_zone_base", "VIPLANES_CT_ZONE_BASE", int, "the topology's (4096)", "first conntrack zone"
    ),
    EnvSetting("sflow", "enabled", "VIPLANES_SFLOW_ENABLED", int, "0", "detect elephants from sFlow (1: on)"),
    EnvSetting("sflow", "listen", "VIPLANES_SFLOW_LISTEN", str, "127.0.0.1:6343", "collector's UDP HOST:PORT"),
    EnvSetting("sflow", "prefixes", "VIPLANES_SFLOW_PREFIXES", str, "", "narrow the grants' prefilter"),
    EnvSetting("sflow", "threshold_mbps", "VIPLANES_SFLOW_THRESHOLD_MBPS", float, "50", "sighting threshold"),
    EnvSetting("sflow", "window_s", "VIPLANES_SFLOW_WINDOW_S", float, "1", "rate window, seconds"),
    EnvSetting("sflow", "max_flows", "VIPLANES_SFLOW_MAX_FLOWS", int, "10000", "flow table cap"),
    EnvSetting(
        "sflow", "goflow2", "VIPLANES_SFLOW_GOFLOW2", str, "/var/cache/viplanes/goflow2-v2.2.6/goflow2", "collector"
    ),
    EnvSetting("links", "hold_down_s", "VIPLANES_LINK_HOLD_DOWN_S", float, "2", "link flap hold-down, seconds"),
    EnvSetting("links", "max_hold_down_s", "VIPLANES_LINK_MAX_HOLD_DOWN_S", float, "60", "longest hold-down, s"),
    EnvSetting("links", "probe_s", "VIPLANES_LINK_PROBE_S", float, "1", "cabling probe interval, s (0: none)"),
    EnvSetting("lab", "pki", "VIPLANES_LAB_PKI", str, "/var/lib/viplanes/lab-pki", "the lab's PKI"),
    EnvSetting("lab", "run_dir", "VIPLANES_LAB_RUN_DIR", str, "/run/viplanes-lab", "the lab's run files"),
    EnvSetting("lab", "demo_dir", "VIPLANES_DEMO_DIR", str, "a new temporary directory", "`make demo` output"),
)

# the file itself: named by --config or this variable (documented, not a key)
CONFIG_ENV = "VIPLANES_CONFIG"

_SECRET_WORDS = ("token", "secret", "password", "db_url", "db")


def is_secret_name(name: str) -> bool:
    """A command option whose value may be a credential (a token, a database URL)."""
    return any(name == w or name.endswith(f"_{w}") or name.startswith(f"{w}_") for w in _SECRET_WORDS)


def mask(value: object, secret: bool) -> str:
    """How a value is shown: a URL keeps its host and loses its password; other secrets are ***."""
    text = str(value)
    if not secret or text == "":
        return text
    if "://" in text:
        return redact_url(text)
    return "***"


def holds_secret(value: object, secret: bool) -> bool:
    """A value that masking would change: a token, or a URL with a password."""
    return secret and mask(value, secret) != str(value)
