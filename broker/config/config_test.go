package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, err := Parse("broker", nil, env(map[string]string{"DATABASE_URL": "postgres://x"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != ":6632" || c.PoolSize != 20 || !c.Migrate || c.Auth != "off" || c.Tenancy || c.MaxBodyBytes != 16<<20 ||
		c.MaxPopBytes != 64<<20 {
		t.Fatalf("unexpected defaults: %+v", c)
	}
}

func TestMaxPopBytesComesFromItsFlagOrEnvironmentAndMustBePositive(t *testing.T) {
	c, err := Parse("broker", nil, env(map[string]string{"DATABASE_URL": "postgres://x", "REGENT_MAX_POP_BYTES": "1048576"}))
	if err != nil || c.MaxPopBytes != 1<<20 {
		t.Fatalf("REGENT_MAX_POP_BYTES: %d, %v", c.MaxPopBytes, err)
	}
	c, err = Parse("broker", []string{"--max-pop-bytes=2048"}, env(map[string]string{"DATABASE_URL": "postgres://x", "REGENT_MAX_POP_BYTES": "1048576"}))
	if err != nil || c.MaxPopBytes != 2048 {
		t.Fatalf("--max-pop-bytes over the environment: %d, %v", c.MaxPopBytes, err)
	}
	_, err = Parse("broker", []string{"--max-pop-bytes=0"}, env(map[string]string{"DATABASE_URL": "postgres://x"}))
	if err == nil || !strings.Contains(err.Error(), "--max-pop-bytes must be positive") {
		t.Fatalf("--max-pop-bytes=0: %v", err)
	}
}

func TestEnvironmentFallsBackAndFlagsWin(t *testing.T) {
	e := env(map[string]string{"DATABASE_URL": "postgres://env", "REGENT_LISTEN": ":7000", "REGENT_POOL_SIZE": "7", "REGENT_DEDUP_WINDOW": "2m"})
	c, err := Parse("broker", []string{"--listen=:8000"}, e)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != ":8000" || c.DatabaseURL != "postgres://env" || c.PoolSize != 7 || c.DedupWindow != 2*time.Minute {
		t.Fatalf("got %+v", c)
	}
}

func TestRejectsBadSettings(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"no database":        {nil, map[string]string{}, "database-url"},
		"tenancy needs auth": {[]string{"--tenancy=on"}, map[string]string{"DATABASE_URL": "x"}, "needs --auth=jwt"},
		"bad auth":           {[]string{"--auth=basic"}, map[string]string{"DATABASE_URL": "x"}, "--auth must be"},
		"bad env int":        {nil, map[string]string{"DATABASE_URL": "x", "REGENT_POOL_SIZE": "many"}, "REGENT_POOL_SIZE"},
		"bad log level":      {[]string{"--log-level=loud"}, map[string]string{"DATABASE_URL": "x"}, "log-level"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("broker", tc.args, env(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestTimeoutsHaveSaneDefaultsAndEnvironmentFallbacks(t *testing.T) {
	c, err := Parse("broker", nil, env(map[string]string{"DATABASE_URL": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.ReadHeaderTimeout != 10*time.Second || c.ReadTimeout != time.Minute || c.IdleTimeout != 2*time.Minute {
		t.Fatalf("timeouts %v %v %v", c.ReadHeaderTimeout, c.ReadTimeout, c.IdleTimeout)
	}
	c, err = Parse("broker", []string{"--idle-timeout=5s"}, env(map[string]string{"DATABASE_URL": "x",
		"REGENT_READ_HEADER_TIMEOUT": "1s", "REGENT_READ_TIMEOUT": "2s", "REGENT_IDLE_TIMEOUT": "3s"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.ReadHeaderTimeout != time.Second || c.ReadTimeout != 2*time.Second || c.IdleTimeout != 5*time.Second {
		t.Fatalf("timeouts %v %v %v", c.ReadHeaderTimeout, c.ReadTimeout, c.IdleTimeout)
	}
	if _, err := Parse("broker", []string{"--read-timeout=0s"}, env(map[string]string{"DATABASE_URL": "x"})); err == nil {
		t.Fatal("a zero read timeout was accepted")
	}
}

func TestQueenVariableNamesAreAliasesWithQueensDefaults(t *testing.T) {
	c, err := Parse("broker", nil, env(map[string]string{"DATABASE_URL": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.RetentionEvery != 5*time.Minute || c.RetentionBatch != 1000 || c.EvictionEvery != time.Minute ||
		c.EvictionBatch != 1000 || c.PartitionCleanupDays != 30 || c.DefaultSubscriptionMode != "" || c.LagEvery != 10*time.Second {
		t.Fatalf("defaults: %+v", c)
	}
	c, err = Parse("broker", nil, env(map[string]string{"DATABASE_URL": "x",
		"RETENTION_INTERVAL": "2000", "RETENTION_BATCH_SIZE": "10", "EVICTION_INTERVAL": "500", "EVICTION_BATCH_SIZE": "20",
		"PARTITION_CLEANUP_DAYS": "7", "DEFAULT_SUBSCRIPTION_MODE": "new", "STATS_INTERVAL_MS": "1500"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.RetentionEvery != 2*time.Second || c.RetentionBatch != 10 || c.EvictionEvery != 500*time.Millisecond ||
		c.EvictionBatch != 20 || c.PartitionCleanupDays != 7 || c.DefaultSubscriptionMode != "new" || c.LagEvery != 1500*time.Millisecond {
		t.Fatalf("Queen's variables: %+v", c)
	}
}

func TestRegentsVariableWinsOverQueensAndAFlagOverBoth(t *testing.T) {
	e := env(map[string]string{"DATABASE_URL": "x", "REGENT_EVICTION_INTERVAL": "3s", "EVICTION_INTERVAL": "2000"})
	c, err := Parse("broker", nil, e)
	if err != nil || c.EvictionEvery != 3*time.Second {
		t.Fatalf("REGENT_EVICTION_INTERVAL over EVICTION_INTERVAL: %v, %v", c.EvictionEvery, err)
	}
	c, err = Parse("broker", []string{"--eviction-interval=4s"}, e)
	if err != nil || c.EvictionEvery != 4*time.Second {
		t.Fatalf("--eviction-interval over both: %v, %v", c.EvictionEvery, err)
	}
}

func TestABadAliasValueIsReportedUnderItsName(t *testing.T) {
	_, err := Parse("broker", nil, env(map[string]string{"DATABASE_URL": "x", "RETENTION_BATCH_SIZE": "lots"}))
	if err == nil || !strings.Contains(err.Error(), "RETENTION_BATCH_SIZE") {
		t.Fatalf("err = %v", err)
	}
	_, err = Parse("broker", nil, env(map[string]string{"DATABASE_URL": "x", "EVICTION_BATCH_SIZE": "0"}))
	if err == nil || !strings.Contains(err.Error(), "--eviction-batch-size") {
		t.Fatalf("err = %v", err)
	}
}

func TestTheAnalyticsSettingsHaveDefaultsAndEnvironmentFallbacks(t *testing.T) {
	c, err := Parse("broker", []string{"--database-url=postgres://x"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if c.Replica != host || c.AnalyticsFlush != 5*time.Second || c.MetricsRetention != 90*24*time.Hour {
		t.Fatalf("defaults: %q %s %s", c.Replica, c.AnalyticsFlush, c.MetricsRetention)
	}
	c, err = Parse("broker", []string{"--database-url=postgres://x"}, env(map[string]string{
		"REGENT_REPLICA": "pod-1", "REGENT_ANALYTICS_FLUSH_INTERVAL": "1s", "REGENT_METRICS_RETENTION": "24h"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Replica != "pod-1" || c.AnalyticsFlush != time.Second || c.MetricsRetention != 24*time.Hour {
		t.Fatalf("from the environment: %q %s %s", c.Replica, c.AnalyticsFlush, c.MetricsRetention)
	}
	if _, err := Parse("broker", []string{"--database-url=postgres://x", "--analytics-flush-interval=0s"}, func(string) string { return "" }); err == nil {
		t.Fatal("a flush interval of 0 is accepted")
	}
}

func TestQueensJWKSVariablesAreAliases(t *testing.T) {
	c, err := Parse("broker", nil, env(map[string]string{"DATABASE_URL": "x",
		"JWT_JWKS_URL": "https://idp.example/.well-known/jwks.json", "JWT_JWKS_REFRESH_INTERVAL": "600",
		"JWT_ALGORITHM": "auto", "JWT_ISSUER": "https://idp.example", "JWT_AUDIENCE": "regent",
		"JWT_ROLES_CLAIM": "queen_role", "JWT_ROLES_ARRAY_CLAIM": "realm_access.roles",
		"JWT_ROLE_ADMIN": "queen-admin", "JWT_ROLE_READ_WRITE": "queen-rw", "JWT_ROLE_READ_ONLY": "queen-ro"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.JWKSURL != "https://idp.example/.well-known/jwks.json" || c.JWKSRefresh != 10*time.Minute || c.JWTAlgorithm != "auto" ||
		c.JWTIssuer != "https://idp.example" || c.JWTAudience != "regent" || c.RoleClaim != "queen_role" || c.RolesClaim != "realm_access.roles" ||
		c.RoleAdmin != "queen-admin" || c.RoleReadWrite != "queen-rw" || c.RoleReadOnly != "queen-ro" {
		t.Fatalf("Queen's JWT variables: %+v", c)
	}
}

func TestJWKSSettingsDefaultToQueensAndAnHourlyRefresh(t *testing.T) {
	c, err := Parse("broker", nil, env(map[string]string{"DATABASE_URL": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.JWKSURL != "" || c.JWKSRefresh != time.Hour || c.JWTAlgorithm != "auto" || c.RoleClaim != "role" || c.RolesClaim != "roles" ||
		c.RoleAdmin != "admin" || c.RoleReadWrite != "read-write" || c.RoleReadOnly != "read-only" {
		t.Fatalf("defaults: %+v", c)
	}
	c, err = Parse("broker", []string{"--jwks-refresh-interval=90s"}, env(map[string]string{"DATABASE_URL": "x", "REGENT_JWKS_REFRESH_INTERVAL": "30"}))
	if err != nil || c.JWKSRefresh != 90*time.Second {
		t.Fatalf("--jwks-refresh-interval over the environment: %v, %v", c.JWKSRefresh, err)
	}
}

// queue-admin-api.md §10: the metrics listen apart from the API, on an
// address of their own.
func TestTheMetricsListenApartFromTheAPIOnAnAddressOfTheirOwn(t *testing.T) {
	c, err := Parse("broker", nil, env(map[string]string{"DATABASE_URL": "postgres://x"}))
	if err != nil || c.MetricsListen != ":6633" {
		t.Fatalf("default --metrics-listen %q, %v; want :6633", c.MetricsListen, err)
	}
	c, err = Parse("broker", nil, env(map[string]string{"DATABASE_URL": "postgres://x", "REGENT_METRICS_LISTEN": "127.0.0.1:9100"}))
	if err != nil || c.MetricsListen != "127.0.0.1:9100" {
		t.Fatalf("REGENT_METRICS_LISTEN: %q, %v", c.MetricsListen, err)
	}
	for _, args := range [][]string{{"--metrics-listen="}, {"--listen=:7000", "--metrics-listen=:7000"}} {
		if _, err := Parse("broker", args, env(map[string]string{"DATABASE_URL": "postgres://x"})); err == nil || !strings.Contains(err.Error(), "--metrics-listen") {
			t.Errorf("%v: %v, want --metrics-listen refused", args, err)
		}
	}
}

func TestTheDrainGraceHasADefaultAnEnvironmentFallbackAndIsNotNegative(t *testing.T) {
	c, err := Parse("broker", nil, env(map[string]string{"DATABASE_URL": "postgres://x"}))
	if err != nil || c.DrainGrace != 5*time.Second {
		t.Fatalf("default --drain-grace %v, %v; want 5s", c.DrainGrace, err)
	}
	c, err = Parse("broker", nil, env(map[string]string{"DATABASE_URL": "postgres://x", "REGENT_DRAIN_GRACE": "12s"}))
	if err != nil || c.DrainGrace != 12*time.Second {
		t.Fatalf("REGENT_DRAIN_GRACE: %v, %v", c.DrainGrace, err)
	}
	if _, err := Parse("broker", []string{"--drain-grace=-1s"}, env(map[string]string{"DATABASE_URL": "postgres://x"})); err == nil || !strings.Contains(err.Error(), "--drain-grace") {
		t.Errorf("--drain-grace=-1s: %v, want it refused", err)
	}
}

func TestCatalogSizeComesFromItsFlagOrEnvironmentAndMustBePositive(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want int
		err  string
	}{
		{nil, "", 100_000, ""},
		{nil, "500", 500, ""},
		{[]string{"--catalog-size=64"}, "500", 64, ""},
		{[]string{"--catalog-size=0"}, "", 0, "--catalog-size must be positive"},
	} {
		c, err := Parse("broker", tc.args, env(map[string]string{"DATABASE_URL": "postgres://x", "REGENT_CATALOG_SIZE": tc.env}))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || c.CatalogSize != tc.want {
			t.Errorf("%v REGENT_CATALOG_SIZE=%q: %d, %v; want %d", tc.args, tc.env, c.CatalogSize, err, tc.want)
		}
	}
}

func TestTheDefaultTokenTenantIsUnsetByDefaultComesFromItsFlagOrEnvironmentAndNeedsTenancy(t *testing.T) {
	on := map[string]string{"DATABASE_URL": "postgres://x", "REGENT_AUTH": "jwt", "REGENT_TENANCY": "on"}
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{nil, "", ""},
		{nil, "shared", "shared"},
		{[]string{"--default-token-tenant=default"}, "shared", "default"},
	} {
		on["REGENT_DEFAULT_TOKEN_TENANT"] = tc.env
		c, err := Parse("broker", tc.args, env(on))
		if err != nil || c.DefaultTokenTenant != tc.want {
			t.Errorf("%v REGENT_DEFAULT_TOKEN_TENANT=%q: %q, %v; want %q", tc.args, tc.env, c.DefaultTokenTenant, err, tc.want)
		}
	}
	_, err := Parse("broker", []string{"--default-token-tenant=shared"}, env(map[string]string{"DATABASE_URL": "postgres://x", "REGENT_AUTH": "jwt"}))
	if err == nil || !strings.Contains(err.Error(), "--default-token-tenant needs --tenancy=on") {
		t.Errorf("--default-token-tenant with tenancy off: %v, want it refused", err)
	}
}
