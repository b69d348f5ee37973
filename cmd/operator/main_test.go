package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFlagDefaults(t *testing.T) {
	s, err := parse(nil, env(map[string]string{"DATABASE_URL": "postgres://x"}))
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{BrokerURL: "http://localhost:6632", WorkerBrokerURL: "http://localhost:6632", DatabaseURL: "postgres://x", ResyncInterval: time.Minute,
		MetricsAddr: ":8080", ProbeAddr: ":8081", LogLevel: slog.LevelInfo}
	if s != want {
		t.Fatalf("defaults %+v, want %+v", s, want)
	}
}

func TestEveryFlagHasItsEnvironmentVariable(t *testing.T) {
	s, err := parse(nil, env(map[string]string{
		"REGENT_BROKER_URL": "http://broker:6632", "DATABASE_URL": "postgres://env",
		"REGENT_SIGNING_SECRET_FILE": "/secret/key", "REGENT_TENANCY": "on", "REGENT_RESYNC_INTERVAL": "30s",
		"REGENT_LEADER_ELECT": "true", "REGENT_METRICS_ADDR": ":9090", "REGENT_PROBE_ADDR": ":9091", "REGENT_LOG_LEVEL": "debug",
		"REGENT_WORKER_IMAGE": "w:1", "REGENT_WORKER_BROKER_URL": "http://w:6632",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{BrokerURL: "http://broker:6632", DatabaseURL: "postgres://env", SigningSecretFile: "/secret/key",
		Tenancy: true, ResyncInterval: 30 * time.Second, LeaderElect: true, MetricsAddr: ":9090", ProbeAddr: ":9091", LogLevel: slog.LevelDebug,
		WorkerImage: "w:1", WorkerBrokerURL: "http://w:6632"}
	if s != want {
		t.Fatalf("got %+v, want %+v", s, want)
	}
}

func TestFlagsWinOverTheEnvironment(t *testing.T) {
	s, err := parse([]string{
		"--broker-url=http://flag:1", "--database-url=postgres://flag", "--signing-secret-file=/f", "--tenancy=off",
		"--resync-interval=5s", "--leader-elect=false", "--metrics-bind-address=:1", "--health-probe-bind-address=:2", "--log-level=warn",
		"--worker-image=f:1", "--worker-broker-url=http://fw:1",
	}, env(map[string]string{
		"REGENT_BROKER_URL": "http://env:1", "DATABASE_URL": "postgres://env", "REGENT_SIGNING_SECRET_FILE": "/e",
		"REGENT_TENANCY": "on", "REGENT_RESYNC_INTERVAL": "1h", "REGENT_LEADER_ELECT": "true",
		"REGENT_METRICS_ADDR": ":3", "REGENT_PROBE_ADDR": ":4", "REGENT_LOG_LEVEL": "debug",
		"REGENT_WORKER_IMAGE": "e:1", "REGENT_WORKER_BROKER_URL": "http://ew:1",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{BrokerURL: "http://flag:1", DatabaseURL: "postgres://flag", SigningSecretFile: "/f",
		ResyncInterval: 5 * time.Second, MetricsAddr: ":1", ProbeAddr: ":2", LogLevel: slog.LevelWarn,
		WorkerImage: "f:1", WorkerBrokerURL: "http://fw:1"}
	if s != want {
		t.Fatalf("got %+v, want %+v", s, want)
	}
}

func TestBadSettingsAreRefused(t *testing.T) {
	db := map[string]string{"DATABASE_URL": "postgres://x"}
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"no database":        {nil, map[string]string{}, "--database-url (or DATABASE_URL) is required"},
		"bad tenancy":        {[]string{"--tenancy=maybe"}, db, `--tenancy must be on or off, not "maybe"`},
		"bad log level":      {[]string{"--log-level=loud"}, db, "--log-level"},
		"zero resync":        {[]string{"--resync-interval=0s"}, db, "--resync-interval must be positive"},
		"bad env duration":   {nil, map[string]string{"DATABASE_URL": "x", "REGENT_RESYNC_INTERVAL": "soon"}, "REGENT_RESYNC_INTERVAL"},
		"bad env bool":       {nil, map[string]string{"DATABASE_URL": "x", "REGENT_LEADER_ELECT": "perhaps"}, "REGENT_LEADER_ELECT"},
		"unknown flag":       {[]string{"--tenant=acme"}, db, "flag provided but not defined: -tenant"},
		"flag without value": {[]string{"--broker-url"}, db, "flag needs an argument"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parse(tc.args, env(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}
