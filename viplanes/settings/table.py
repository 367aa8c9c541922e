"""Every ``VIPLANES_*`` setting: its name, ``[table] key`` in the configuration file, type,
bounds, default and help. The only place a default or a bound is written (issue 43)."""

from __future__ import annotations

from dataclasses import dataclass

from viplanes.settings.parse import BOOL_FORM, SettingError, parse_bool, parse_float, parse_int

Value = str | int | float | bool | None
_UNSET = object()


@dataclass(frozen=True)
class EnvSetting:
    """``[table] key`` of the file, exported as ``env`` when the environment does not set it.

    ``default`` is what `config show` and the docs print; it is parsed into the typed default
    unless ``value`` gives one (a default that is a description, such as "the system resolver").
    ``low``/``high`` bound numbers; ``above`` makes ``low`` exclusive."""

    table: str
    key: str
    env: str
    kind: type  # str, int, float or bool: what the value must be
    default: str
    help: str
    secret: bool = False
    low: float | None = None
    high: float | None = None
    above: bool = False
    value: object = _UNSET

    def typed_default(self) -> Value:
        if self.value is not _UNSET:
            return self.value  # type: ignore[return-value]
        return self.parse(self.default)

    def accepted(self) -> str:
        """The form a value must have, as an error message says it."""
        if self.kind is bool:
            return BOOL_FORM
        if self.kind is str:
            return "a string"
        word = "an integer" if self.kind is int else "a number"
        if self.low is not None and self.high is not None:
            return f"{word} from {_num(self.low)} to {_num(self.high)}"
        if self.low is not None:
            return f"{word} {'>' if self.above else '>='} {_num(self.low)}"
        return word

    def parse(self, raw: str) -> Value:
        """The typed value of ``raw``; SettingError naming the variable and the accepted form."""
        text = raw.strip()
        if self.kind is str:
            return text
        if self.kind is bool:
            flag = parse_bool(text)
            if flag is None:
                raise SettingError(self.env, raw, self.accepted())
            return flag
        number: int | float | None = parse_int(text) if self.kind is int else parse_float(text)
        if number is None or not self._in_bounds(number):
            raise SettingError(self.env, raw, self.accepted())
        return number

    def _in_bounds(self, number: float) -> bool:
        if self.low is not None and (number <= self.low if self.above else number < self.low):
            return False
        return self.high is None or number <= self.high


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _s(table: str, key: str, env: str, default: str, help: str, **kw: object) -> EnvSetting:
    return EnvSetting(table, key, env, str, default, help, **kw)  # type: ignore[arg-type]


def _i(table: str, key: str, env: str, default: str, help: str, low: float = 0, **kw: object) -> EnvSetting:
    return EnvSetting(table, key, env, int, default, help, low=low, **kw)  # type: ignore[arg-type]


def _f(table: str, key: str, env: str, default: str, help: str, low: float = 0, **kw: object) -> EnvSetting:
    return EnvSetting(table, key, env, float, default, help, low=low, **kw)  # type: ignore[arg-type]


def _b(table: str, key: str, env: str, default: str, help: str) -> EnvSetting:
    return EnvSetting(table, key, env, bool, default, help)


ENV_SETTINGS: tuple[EnvSetting, ...] = (
    _s(
        "db",
        "url",
        "VIPLANES_DB_URL",
        "sqlite:///./viplanes.db",
        "database of every command",
        secret=True,
        value="sqlite:///viplanes.db",
    ),
    _s("pki", "dir", "VIPLANES_PKI", "", "OpenFlow PKI directory (ca.crt, controller.crt/.key)"),
    _s("pki", "deny_list", "VIPLANES_SWITCH_DENY_LIST", "PKI_DIR/denied-switches", "switch deny-list", value=""),
    _s("client", "api_url", "VIPLANES_API_URL", "http://127.0.0.1:8080", "API the CLI talks to"),
    _s("client", "token", "VIPLANES_TOKEN", "", "the CLI's bearer token", secret=True),
    _s(
        "client",
        "ca_file",
        "VIPLANES_CA_FILE",
        "the system store",
        "CA bundle the CLI checks the API against",
        value="",
    ),
    _f("retention", "lane_days", "VIPLANES_LANE_RETENTION_DAYS", "90", "keep ended lanes (0: keep)"),
    _f("retention", "audit_days", "VIPLANES_AUDIT_RETENTION_DAYS", "365", "keep audit events"),
    _s(
        "retention",
        "export_dir",
        "VIPLANES_RETENTION_EXPORT_DIR",
        "./viplanes-archive",
        "export dir",
        value="viplanes-archive",
    ),
    _f("retention", "every_s", "VIPLANES_PRUNE_EVERY_S", "3600", "prune period, seconds (0: off)"),
    _i("auth", "max_failures", "VIPLANES_AUTH_MAX_FAILURES", "10", "failed logins per address", low=1),
    _i("auth", "net_max_failures", "VIPLANES_AUTH_NET_MAX_FAILURES", "50", "per /24 or /64", low=1),
    _i("auth", "global_max_failures", "VIPLANES_AUTH_GLOBAL_MAX_FAILURES", "500", "in all", low=1),
    _i("auth", "window_s", "VIPLANES_AUTH_WINDOW_S", "60", "failure window, seconds", low=1),
    _f("auth", "token_cache_ttl_s", "VIPLANES_TOKEN_CACHE_TTL", "5", "token cache, seconds (0: off)"),
    _s("ui", "secret", "VIPLANES_UI_SECRET", "a per-process secret", "signs console cookies", secret=True, value=""),
    _i("ui", "session_s", "VIPLANES_UI_SESSION_S", "28800", "console sign-in lifetime, seconds", low=1),
    _s("oidc", "issuer", "VIPLANES_OIDC_ISSUER", "none (OIDC off)", "OpenID Connect issuer URL", value=""),
    _s("oidc", "audience", "VIPLANES_OIDC_AUDIENCE", "", "the API's audience in access tokens"),
    _s("oidc", "groups_claim", "VIPLANES_OIDC_GROUPS_CLAIM", "groups", "claim holding the groups"),
    _s("oidc", "group_roles", "VIPLANES_OIDC_GROUP_ROLES", "", "group=role,... (operator, researcher)"),
    _f("oidc", "membership_grace_s", "VIPLANES_OIDC_MEMBERSHIP_GRACE_S", "30", "group proof past exp", high=3600),
    _f(
        "oidc",
        "membership_sweep_s",
        "VIPLANES_OIDC_MEMBERSHIP_SWEEP_S",
        "10",
        "lapsed-group sweep, s",
        low=1,
        high=3600,
    ),
    _s("oidc", "cli_client_id", "VIPLANES_OIDC_CLI_CLIENT_ID", "viplanes-cli", "`viplanes login` client"),
    _s("oidc", "client_id", "VIPLANES_OIDC_CLIENT_ID", "none (console sign-in off)", "the console's client", value=""),
    _s("oidc", "client_secret", "VIPLANES_OIDC_CLIENT_SECRET", "", "the console's client secret", secret=True),
    _s("oidc", "client_secret_file", "VIPLANES_OIDC_CLIENT_SECRET_FILE", "", "file holding it (0600)"),
    _s("oidc", "display_name", "VIPLANES_OIDC_DISPLAY_NAME", "campus sign-in", '"Sign in with ..."'),
    _s("oidc", "redirect_uri", "VIPLANES_OIDC_REDIRECT_URI", "from the request", "URL of /ui/login/callback", value=""),
    _s("oidc", "scope", "VIPLANES_OIDC_SCOPE", "openid profile email", "scopes the console asks for"),
    _i("lanes", "max_matches", "VIPLANES_MAX_LANE_MATCHES", "64", "matches one lane may need", low=1),
    _s("dns", "server", "VIPLANES_DNS_SERVER", "the system resolver", "resolver for lane names", value=""),
    _i("dns", "ttl_floor_s", "VIPLANES_DNS_TTL_FLOOR_S", "30", "shortest re-resolve window", low=1),
    _i("dns", "ttl_cap_s", "VIPLANES_DNS_TTL_CAP_S", "3600", "longest re-resolve window", low=1),
    _i("auto", "firefly_port", "VIPLANES_FIREFLY_PORT", "0", "scitags firefly UDP port (0: off; 10514)", high=65535),
    _s("auto", "firefly_host", "VIPLANES_FIREFLY_HOST", "0.0.0.0", "firefly listen address"),
    _f("auto", "firefly_rate", "VIPLANES_FIREFLY_RATE", "5", "fireflies per source per second"),
    _i("auto", "queue", "VIPLANES_AUTO_QUEUE", "256", "sightings waiting for the acceptor"),
    _f("auto", "idle_check_s", "VIPLANES_AUTO_IDLE_CHECK_S", "1", "idle-end check period, s"),
    _b("auto", "nat_takeover", "VIPLANES_AUTO_NAT_TAKEOVER", "true", "take over running NAT'd flows (false: refuse)"),
    _f("auto", "nat_watch_s", "VIPLANES_AUTO_NAT_WATCH_S", "0.8", "watch before a NAT takeover, s (0.1-2)"),
    _f("auto", "nat_hold_s", "VIPLANES_AUTO_NAT_HOLD_S", "0.5", "unpaired NAT'd sighting waits, s (0-2)"),
    _b("switches", "learn_features", "VIPLANES_LEARN_SWITCH_FEATURES", "false", "ask TABLE/METER_FEATURES"),
    _i(
        "switches", "ct_zone_base", "VIPLANES_CT_ZONE_BASE", "the topology's (4096)", "first conntrack zone", value=None
    ),
    _b("sflow", "enabled", "VIPLANES_SFLOW_ENABLED", "false", "detect elephants from sFlow"),
    _s("sflow", "listen", "VIPLANES_SFLOW_LISTEN", "127.0.0.1:6343", "collector's UDP HOST:PORT"),
    _s("sflow", "prefixes", "VIPLANES_SFLOW_PREFIXES", "", "narrow the grants' prefilter"),
    _f("sflow", "threshold_mbps", "VIPLANES_SFLOW_THRESHOLD_MBPS", "50", "sighting threshold", above=True),
    _f("sflow", "window_s", "VIPLANES_SFLOW_WINDOW_S", "1", "rate window, seconds", above=True),
    _i("sflow", "max_flows", "VIPLANES_SFLOW_MAX_FLOWS", "10000", "flow table cap", low=1),
    _s(
        "sflow",
        "goflow2",
        "VIPLANES_SFLOW_GOFLOW2",
        "/var/cache/viplanes/goflow2-v2.2.6/goflow2",
        "collector",
        value="",
    ),
    _f("links", "hold_down_s", "VIPLANES_LINK_HOLD_DOWN_S", "2", "link flap hold-down, seconds", high=3600),
    _f("links", "max_hold_down_s", "VIPLANES_LINK_MAX_HOLD_DOWN_S", "60", "longest hold-down, s", high=3600),
    _f("links", "probe_s", "VIPLANES_LINK_PROBE_S", "1", "cabling probe interval, s (0: none)", high=3600),
    _s("lab", "pki", "VIPLANES_LAB_PKI", "/var/lib/viplanes/lab-pki", "the lab's PKI"),
    _s("lab", "run_dir", "VIPLANES_LAB_RUN_DIR", "/run/viplanes-lab", "the lab's run files"),
    _s("lab", "demo_dir", "VIPLANES_DEMO_DIR", "a new temporary directory", "`make demo` output", value=""),
)

BY_ENV: dict[str, EnvSetting] = {s.env: s for s in ENV_SETTINGS}

# the file itself: named by --config or this variable (documented, not a key)
CONFIG_ENV = "VIPLANES_CONFIG"


def setting(env: str) -> EnvSetting:
    return BY_ENV[env]
