// Command broker serves Regent's Queen-compatible queue and streams API on
// PostgreSQL.
//
//	broker [flags]          serve (applies migrations first unless --migrate=false)
//	broker migrate [flags]  apply migrations and exit
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/regent-mq/regent/broker/app"
	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/pg/db"
)

// gcPercent is the broker's GOGC unless the environment sets one. Its live
// heap is small (caches, the hot list, the requests in flight) while every
// request allocates its buffers, so at Go's default of 100 the collector
// runs every few megabytes, and on a small machine its CPU comes out of the
// requests'. Measured again with make bench's points (2 cores, 2026-12-04,
// two alternated rounds): at 100 the broker's CPU per request was 18 % higher
// on push at 4 clients, 16 % on the cycle at 64 and 5-7 % elsewhere, while
// its RSS at 64 clients was 55-61 MB instead of 69-80 MB. A soft limit
// instead (GOMEMLIMIT=42MiB) held the RSS near 64 MB but, at P=10,000 with
// the catalog holding those partitions, the collector ran almost without
// pause and the broker's CPU per cycle rose from 0.34 to 1.5 ms. So 200, and GOMEMLIMIT where the
// memory is bounded: the Helm chart sets it to the container's limit.
const gcPercent = 200

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "broker:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	migrateOnly := len(args) > 0 && args[0] == "migrate"
	if migrateOnly {
		args = args[1:]
	}
	cfg, err := config.Parse("broker", args, os.Getenv)
	if err != nil {
		return err
	}
	log := newLogger(cfg)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if migrateOnly {
		store, err := db.Open(ctx, cfg.DatabaseURL, db.Options{MaxConns: cfg.PoolSize})
		if err != nil {
			return err
		}
		defer store.Close()
		n, err := store.Migrate(ctx, log)
		if err != nil {
			return err
		}
		log.Info("migrations complete", "applied", n)
		return nil
	}

	b, err := app.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer b.Close()
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	ml, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		l.Close()
		return fmt.Errorf("listen on %s: %w", cfg.MetricsListen, err)
	}
	log.Info("broker listening", "addr", l.Addr().String(), "metrics", ml.Addr().String(), "version", app.Version,
		"auth", cfg.Auth, "tenancy", cfg.Tenancy)
	return b.Serve(ctx, l, ml)
}

func newLogger(cfg config.Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
