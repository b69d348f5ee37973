// Package config reads the broker's settings from flags, with an environment
// variable as the fallback for each one. An explicit flag wins.
package config

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
)

// DefaultSpoolDir is where the spool lives unless told otherwise: the path
// the Helm chart mounts its volume at.
const DefaultSpoolDir = "/var/lib/regent/spool"

// DefaultPushCalls is --push-calls' default: how many push calls to the
// database a replica has in flight before pushes join the next one.
// Measured on 2 cores with synchronous commits: at 4 clients nothing waits,
// and at 64 a call carries a dozen requests and PostgreSQL spends about a
// third less CPU per push; at 2, 4 clients already waited, for 12 % less
// throughput.
const DefaultPushCalls = 4

// DefaultCatalogSize is --catalog-size's default: the bound on the
// partitions, and on the queues, that a replica's catalog caches.
const DefaultCatalogSize = 100_000

// DefaultMetricsListen is --metrics-listen's default: the port next to the
// API's, which the chart's ServiceMonitor scrapes.
const DefaultMetricsListen = ":6633"

// Config is everything the broker can be told at start.
type Config struct {
	Listen string
	// MetricsListen serves /metrics and /metrics/prometheus apart from the
	// API: their labels name every tenant's queues (queue-admin-api.md §10).
	MetricsListen string
	DatabaseURL   string
	PoolSize      int
	CitusRoute    bool
	// PushCalls bounds the push calls in flight to PostgreSQL; pushes that
	// arrive while all are join the next one (broker/domain/batch).
	PushCalls    int
	LogLevel     slog.Level
	LogFormat    string
	Migrate      bool
	MaxBodyBytes int64
	MaxPopBytes  int64 // stored bytes one pop answer may carry, beyond its first segment
	CatalogSize  int   // partitions, and queues, the catalog caches (broker/domain/catalog)

	Auth          string // off | jwt
	JWTSecret     string
	JWTSecretFile string
	JWTPublicKey  string // path to a PEM public key (RS256, ES256 or EdDSA)
	JWTIssuer     string
	JWTAudience   string
	Tenancy       bool
	TenantClaim   string
	// DefaultTokenTenant is the tenant of a token without the tenant
	// claim, with tenancy on; empty refuses such a token.
	DefaultTokenTenant string

	JWKSURL      string        // an identity provider's JWK Set
	JWKSRefresh  time.Duration // how often it is fetched again
	JWTAlgorithm string        // auto, or the one algorithm tokens may use
	RoleClaim    string        // claim of the access level, a string
	RolesClaim   string        // claim of the access levels, an array
	// The role values that grant each access level.
	RoleReadOnly, RoleReadWrite, RoleAdmin string

	EncryptionKey string   // path to the current 32-byte key
	EncryptionOld []string // paths to retired keys, still accepted for reads

	DedupWindow time.Duration
	// StoreTraceparent keeps a push's W3C traceparent in its frames.
	StoreTraceparent bool
	ReseedInterval   time.Duration
	RetentionEvery   time.Duration
	RetentionBatch   int
	EvictionEvery    time.Duration
	EvictionBatch    int
	LagEvery         time.Duration

	PartitionCleanupDays    int
	DefaultSubscriptionMode string // of a pop without subscriptionMode
	ShutdownGrace           time.Duration
	// DrainGrace is how long the listener keeps serving after SIGTERM, with
	// /ready failing, so that endpoints stop routing here before it closes.
	DrainGrace time.Duration

	Replica          string        // this replica's name in the analytics: its pod name
	AnalyticsFlush   time.Duration // how often the operation counters reach the database
	MetricsRetention time.Duration // how long the analytics keep their minutes

	SpoolDir string // push maintenance's spool, one per broker (broker/domain/spool)

	ReadHeaderTimeout time.Duration // to receive a request's headers
	ReadTimeout       time.Duration // to receive a request's body, after its headers
	IdleTimeout       time.Duration // a keep-alive connection may wait for its next request
}

// Flags binds each setting to a flag whose default comes from its
// environment variable when that is set. The operator uses it too, so both
// binaries read their settings the same way.
type Flags struct {
	*flag.FlagSet
	getenv func(string) string
	errs   []error
}

// NewFlags makes a FlagSet that falls back to getenv.
func NewFlags(name string, getenv func(string) string) *Flags {
	return &Flags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), getenv: getenv}
}

// Parse reports any unparsable environment value, then parses args.
func (f *Flags) Parse(args []string) error {
	if err := errors.Join(f.errs...); err != nil {
		return err
	}
	return f.FlagSet.Parse(args)
}

// env returns the value of the first of names that is set, with that name,
// or def. The first name is Regent's; the others are aliases, Queen's names
// for the same setting, so that a Queen deployment's settings carry over.
func (f *Flags) env(def string, names []string) (string, string) {
	for _, n := range names {
		if v := f.getenv(n); v != "" {
			return v, n
		}
	}
	return def, names[0]
}

func envUsage(usage string, names []string) string {
	if len(names) == 1 {
		return usage + " (env " + names[0] + ")"
	}
	return usage + " (env " + names[0] + ", or " + strings.Join(names[1:], ", ") + ")"
}

// The *Env methods bind a flag to env and its aliases, in that order.

func (f *Flags) StrEnv(p *string, name, env, def, usage string, aliases ...string) {
	names := append([]string{env}, aliases...)
	v, _ := f.env(def, names)
	f.FlagSet.StringVar(p, name, v, envUsage(usage, names))
}

func (f *Flags) IntEnv(p *int, name, env string, def int, usage string, aliases ...string) {
	names := append([]string{env}, aliases...)
	s, from := f.env(strconv.Itoa(def), names)
	v, err := strconv.Atoi(s)
	if err != nil {
		f.errs = append(f.errs, fmt.Errorf("%s: %w", from, err))
	}
	f.FlagSet.IntVar(p, name, v, envUsage(usage, names))
}

func (f *Flags) Int64Env(p *int64, name, env string, def int64, usage string, aliases ...string) {
	names := append([]string{env}, aliases...)
	s, from := f.env(strconv.FormatInt(def, 10), names)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f.errs = append(f.errs, fmt.Errorf("%s: %w", from, err))
	}
	f.FlagSet.Int64Var(p, name, v, envUsage(usage, names))
}

func (f *Flags) BoolEnv(p *bool, name, env string, def bool, usage string, aliases ...string) {
	names := append([]string{env}, aliases...)
	s, from := f.env(strconv.FormatBool(def), names)
	v, err := strconv.ParseBool(s)
	if err != nil {
		f.errs = append(f.errs, fmt.Errorf("%s: %w", from, err))
	}
	f.FlagSet.BoolVar(p, name, v, envUsage(usage, names))
}

// DurationEnv takes a Go duration ("90s"), or a bare number of
// milliseconds, the unit of Queen's variables (RETENTION_INTERVAL=2000).
func (f *Flags) DurationEnv(p *time.Duration, name, env string, def time.Duration, usage string, aliases ...string) {
	f.durationEnv(p, name, env, def, time.Millisecond, usage, aliases)
}

// SecondsEnv is DurationEnv for the few Queen variables that count seconds
// (JWT_JWKS_REFRESH_INTERVAL=3600): a bare number is seconds.
func (f *Flags) SecondsEnv(p *time.Duration, name, env string, def time.Duration, usage string, aliases ...string) {
	f.durationEnv(p, name, env, def, time.Second, usage, aliases)
}

func (f *Flags) durationEnv(p *time.Duration, name, env string, def, unit time.Duration, usage string, aliases []string) {
	names := append([]string{env}, aliases...)
	s, from := f.env(def.String(), names)
	v, err := time.ParseDuration(s)
	if n, nerr := strconv.ParseInt(s, 10, 64); nerr == nil {
		v, err = time.Duration(n)*unit, nil
	}
	if err != nil {
		f.errs = append(f.errs, fmt.Errorf("%s: %w", from, err))
	}
	f.FlagSet.DurationVar(p, name, v, envUsage(usage, names))
}

// Parse reads args (without the program name), falling back to getenv.
func Parse(name string, args []string, getenv func(string) string) (Config, error) {
	var c Config
	var tenancy, logLevel, old string
	f := NewFlags(name, getenv)
	f.StrEnv(&c.Listen, "listen", "REGENT_LISTEN", ":6632", "HTTP listen address")
	f.StrEnv(&c.MetricsListen, "metrics-listen", "REGENT_METRICS_LISTEN", DefaultMetricsListen, "listen address of /metrics and /metrics/prometheus, apart from the API")
	f.StrEnv(&c.DatabaseURL, "database-url", "DATABASE_URL", "", "PostgreSQL connection string")
	f.IntEnv(&c.PoolSize, "pool-size", "REGENT_POOL_SIZE", 20, "maximum PostgreSQL connections")
	f.BoolEnv(&c.CitusRoute, "citus-route", "REGENT_CITUS_ROUTE", true, "on Citus, send each push, pop, ack, cycle, state read and trace straight to the node that holds its partition, over a pool of --pool-size on each node, rather than through the coordinator")
	f.IntEnv(&c.PushCalls, "push-calls", "REGENT_PUSH_CALLS", DefaultPushCalls, "push calls to PostgreSQL in flight; pushes that arrive while all are join the next call")
	f.StrEnv(&logLevel, "log-level", "REGENT_LOG_LEVEL", "info", "log level: debug, info, warn or error")
	f.StrEnv(&c.LogFormat, "log-format", "REGENT_LOG_FORMAT", "text", "log format: text or json")
	f.BoolEnv(&c.Migrate, "migrate", "REGENT_MIGRATE", true, "apply schema migrations at start")
	f.Int64Env(&c.MaxBodyBytes, "max-body-bytes", "REGENT_MAX_BODY_BYTES", 16<<20, "largest accepted request body; larger is 413")
	f.Int64Env(&c.MaxPopBytes, "max-pop-bytes", "REGENT_MAX_POP_BYTES", 64<<20, "stored (compressed) bytes one pop may deliver; a pop always delivers at least one message")
	f.IntEnv(&c.CatalogSize, "catalog-size", "REGENT_CATALOG_SIZE", DefaultCatalogSize, "partitions, and queues, whose ids and options the broker caches; the least recently used go past it")
	f.StrEnv(&c.Auth, "auth", "REGENT_AUTH", "off", "authentication: off or jwt")
	f.StrEnv(&c.JWTSecret, "jwt-secret", "REGENT_JWT_SECRET", "", "HS256 shared secret", "JWT_SECRET")
	f.StrEnv(&c.JWTSecretFile, "jwt-secret-file", "REGENT_JWT_SECRET_FILE", "", "file holding the HS256 shared secret")
	f.StrEnv(&c.JWTPublicKey, "jwt-public-key-file", "REGENT_JWT_PUBLIC_KEY_FILE", "", "PEM public key for RS256, ES256 or EdDSA tokens")
	f.StrEnv(&c.JWKSURL, "jwks-url", "REGENT_JWKS_URL", "", "an identity provider's JWK Set URL; tokens are verified with its keys (RS256, ES256 or EdDSA)", "JWT_JWKS_URL")
	f.SecondsEnv(&c.JWKSRefresh, "jwks-refresh-interval", "REGENT_JWKS_REFRESH_INTERVAL", time.Hour, "how often the JWK Set is fetched again (a bare number is seconds); a token of an unknown key ID fetches it at once, at most every 10s", "JWT_JWKS_REFRESH_INTERVAL")
	f.StrEnv(&c.JWTAlgorithm, "jwt-algorithm", "REGENT_JWT_ALGORITHM", "auto", "auto takes the algorithm from the key; HS256, RS256, ES256 or EdDSA also requires it", "JWT_ALGORITHM")
	f.StrEnv(&c.JWTIssuer, "jwt-issuer", "REGENT_JWT_ISSUER", "", "required token issuer, when set", "JWT_ISSUER")
	f.StrEnv(&c.JWTAudience, "jwt-audience", "REGENT_JWT_AUDIENCE", "", "required token audience, when set", "JWT_AUDIENCE")
	f.StrEnv(&tenancy, "tenancy", "REGENT_TENANCY", "off", "multi-tenancy: off or on (on needs --auth=jwt)")
	f.StrEnv(&c.TenantClaim, "tenant-claim", "REGENT_TENANT_CLAIM", "tenant", "JWT claim that names the tenant; a dotted path reaches into objects")
	f.StrEnv(&c.DefaultTokenTenant, "default-token-tenant", "REGENT_DEFAULT_TOKEN_TENANT", "", "with --tenancy=on, the tenant of a token without the tenant claim; empty refuses such a token with 403")
	f.StrEnv(&c.RoleClaim, "role-claim", "REGENT_ROLE_CLAIM", "role", "JWT claim that holds the access level (read-only, read-write or admin)", "JWT_ROLES_CLAIM")
	f.StrEnv(&c.RoleReadOnly, "role-read-only", "REGENT_ROLE_READ_ONLY", "read-only", "the role value that grants read-only access", "JWT_ROLE_READ_ONLY")
	f.StrEnv(&c.RoleReadWrite, "role-read-write", "REGENT_ROLE_READ_WRITE", "read-write", "the role value that grants read-write access", "JWT_ROLE_READ_WRITE")
	f.StrEnv(&c.RoleAdmin, "role-admin", "REGENT_ROLE_ADMIN", "admin", "the role value that grants admin access", "JWT_ROLE_ADMIN")
	f.StrEnv(&c.RolesClaim, "roles-claim", "REGENT_ROLES_CLAIM", "roles", "JWT claim that holds an array of access levels, e.g. realm_access.roles for Keycloak or groups for Dex", "JWT_ROLES_ARRAY_CLAIM")
	f.StrEnv(&c.EncryptionKey, "encryption-key-file", "REGENT_ENCRYPTION_KEY_FILE", "", "file holding the 32-byte AES-256 payload key")
	f.StrEnv(&old, "encryption-old-key-files", "REGENT_ENCRYPTION_OLD_KEY_FILES", "", "comma-separated files of retired keys, still accepted for reads")
	f.BoolEnv(&c.StoreTraceparent, "store-traceparent", "REGENT_STORE_TRACEPARENT", false, "store a push's W3C traceparent with its messages and return it on pop; a broker older than this release cannot read such messages, so switch it on once none shares the database (broker/pg/migrate/UPGRADING.md)")
	f.DurationEnv(&c.DedupWindow, "dedup-window", "REGENT_DEDUP_WINDOW", time.Hour, "how long a client transactionId is remembered per partition, in queues that set no dedupWindowSeconds")
	f.DurationEnv(&c.ReseedInterval, "reseed-interval", "REGENT_RESEED_INTERVAL", 5*time.Second, "how often the hot list is reseeded from the database")
	f.DurationEnv(&c.RetentionEvery, "retention-interval", "REGENT_RETENTION_INTERVAL", 5*time.Minute, "how often the retention sweep runs (with the dedup and idle partition sweeps)", "RETENTION_INTERVAL")
	f.IntEnv(&c.RetentionBatch, "retention-batch-size", "REGENT_RETENTION_BATCH_SIZE", 1000, "rows one retention statement deletes", "RETENTION_BATCH_SIZE")
	f.DurationEnv(&c.EvictionEvery, "eviction-interval", "REGENT_EVICTION_INTERVAL", time.Minute, "how often the maxWaitTimeSeconds eviction sweep runs", "EVICTION_INTERVAL")
	f.IntEnv(&c.EvictionBatch, "eviction-batch-size", "REGENT_EVICTION_BATCH_SIZE", 1000, "rows one eviction statement deletes", "EVICTION_BATCH_SIZE")
	f.IntEnv(&c.PartitionCleanupDays, "partition-cleanup-days", "REGENT_PARTITION_CLEANUP_DAYS", 30, "days after which an empty partition without cursor activity is deleted", "PARTITION_CLEANUP_DAYS")
	f.StrEnv(&c.DefaultSubscriptionMode, "default-subscription-mode", "REGENT_DEFAULT_SUBSCRIPTION_MODE", "", "subscriptionMode of a pop that sends none: new (or new-only) starts a new group at its first pop, anything else means all", "DEFAULT_SUBSCRIPTION_MODE")
	f.DurationEnv(&c.LagEvery, "lag-interval", "REGENT_LAG_INTERVAL", 10*time.Second, "how often the consumer group lag metrics are recomputed", "STATS_INTERVAL_MS")
	host, _ := os.Hostname()
	f.StrEnv(&c.Replica, "replica", "REGENT_REPLICA", host, "this replica's name in the analytics routes (the pod name)")
	f.DurationEnv(&c.AnalyticsFlush, "analytics-flush-interval", "REGENT_ANALYTICS_FLUSH_INTERVAL", 5*time.Second, "how often the per-minute operation counters are written to the database")
	f.DurationEnv(&c.MetricsRetention, "metrics-retention", "REGENT_METRICS_RETENTION", 90*24*time.Hour, "how long the analytics keep their per-minute counters and samples")
	f.StrEnv(&c.SpoolDir, "spool-dir", "REGENT_SPOOL_DIR", DefaultSpoolDir, "directory of this broker's push-maintenance spool; must be writable, and its own (a volume of its own in Kubernetes)")
	f.DurationEnv(&c.ShutdownGrace, "shutdown-grace", "REGENT_SHUTDOWN_GRACE", 30*time.Second, "how long in-flight requests may drain on SIGTERM")
	f.DurationEnv(&c.DrainGrace, "drain-grace", "REGENT_DRAIN_GRACE", 5*time.Second, "how long the listener keeps serving after SIGTERM, /ready failing, before parked long-polls are answered and in-flight requests drained")
	f.DurationEnv(&c.ReadHeaderTimeout, "read-header-timeout", "REGENT_READ_HEADER_TIMEOUT", 10*time.Second, "how long a client may take to send a request's headers")
	f.DurationEnv(&c.ReadTimeout, "read-timeout", "REGENT_READ_TIMEOUT", time.Minute, "how long a client may take to send a request's body; a long-poll's wait is not part of it")
	f.DurationEnv(&c.IdleTimeout, "idle-timeout", "REGENT_IDLE_TIMEOUT", 2*time.Minute, "how long an idle keep-alive connection is kept open")
	if err := f.Parse(args); err != nil {
		return c, err
	}
	if err := c.LogLevel.UnmarshalText([]byte(logLevel)); err != nil {
		return c, fmt.Errorf("--log-level: %w", err)
	}
	switch tenancy {
	case "on":
		c.Tenancy = true
	case "off":
	default:
		return c, fmt.Errorf("--tenancy must be on or off, not %q", tenancy)
	}
	if old != "" {
		c.EncryptionOld = strings.Split(old, ",")
	}
	return c, c.validate()
}

func (c Config) validate() error {
	var errs []error
	if c.DatabaseURL == "" {
		errs = append(errs, errors.New("--database-url (or DATABASE_URL) is required"))
	}
	if c.SpoolDir == "" {
		errs = append(errs, errors.New("--spool-dir must name a directory"))
	}
	if c.Auth != "off" && c.Auth != "jwt" {
		errs = append(errs, fmt.Errorf("--auth must be off or jwt, not %q", c.Auth))
	}
	if c.Tenancy && c.Auth != "jwt" {
		errs = append(errs, errors.New("--tenancy=on needs --auth=jwt: the tenant comes from the token"))
	}
	if c.DefaultTokenTenant != "" && !c.Tenancy {
		errs = append(errs, errors.New("--default-token-tenant needs --tenancy=on: with it off, every token is on the default tenant"))
	}
	if c.PoolSize < 2 {
		errs = append(errs, errors.New("--pool-size must be at least 2"))
	}
	if c.PushCalls < 1 {
		errs = append(errs, errors.New("--push-calls must be at least 1"))
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format must be text or json, not %q", c.LogFormat))
	}
	if c.LagEvery <= 0 || c.RetentionEvery <= 0 || c.EvictionEvery <= 0 {
		errs = append(errs, errors.New("--lag-interval, --retention-interval and --eviction-interval must be positive"))
	}
	if c.RetentionBatch < 1 || c.EvictionBatch < 1 || c.PartitionCleanupDays < 1 {
		errs = append(errs, errors.New("--retention-batch-size, --eviction-batch-size and --partition-cleanup-days must be at least 1"))
	}
	if c.AnalyticsFlush <= 0 || c.MetricsRetention <= 0 {
		errs = append(errs, errors.New("--analytics-flush-interval and --metrics-retention must be positive"))
	}
	if c.MaxBodyBytes < 1<<20 {
		errs = append(errs, errors.New("--max-body-bytes must be at least 1 MiB"))
	}
	if c.MaxPopBytes < 1 {
		errs = append(errs, errors.New("--max-pop-bytes must be positive"))
	}
	if c.CatalogSize < 1 {
		errs = append(errs, errors.New("--catalog-size must be positive"))
	}
	if c.MetricsListen == "" || c.MetricsListen == c.Listen {
		errs = append(errs, errors.New("--metrics-listen must be an address of its own, apart from --listen"))
	}
	if c.DrainGrace < 0 {
		errs = append(errs, errors.New("--drain-grace must not be negative"))
	}
	if c.ReadHeaderTimeout <= 0 || c.ReadTimeout <= 0 || c.IdleTimeout <= 0 {
		errs = append(errs, errors.New("--read-header-timeout, --read-timeout and --idle-timeout must be positive"))
	}
	return errors.Join(errs...)
}
