// Package flags holds the broker's cluster-wide switches, push maintenance
// and pop maintenance (queue-admin-api.md §7). They live in the database, so
// they survive restarts, and every replica keeps a copy in memory that the
// hot paths read for free: a NOTIFY brings a change at once, and a re-read
// every second bounds the delay when a notification is lost.
package flags

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/pg"
)

// The switches, by Queen's names for them.
const (
	Maintenance    = "maintenance_mode"
	PopMaintenance = "pop_maintenance_mode"
)

// Channel is the NOTIFY channel a change is announced on; the payload is
// empty, and a listener re-reads every switch.
const Channel = "regent_flags"

// Reread is how often a replica re-reads the switches without being told.
const Reread = time.Second

// Flags is this replica's view of the switches. It is safe for concurrent use.
type Flags struct {
	pool           *pgxpool.Pool
	log            *slog.Logger
	maintenance    atomic.Bool
	popMaintenance atomic.Bool
	known          atomic.Bool
}

// New returns Flags reading through pool, all off until the first read.
func New(pool *pgxpool.Pool, log *slog.Logger) *Flags {
	return &Flags{pool: pool, log: log}
}

// Maintenance reports whether push maintenance is on, as last read.
func (f *Flags) Maintenance() bool { return f.maintenance.Load() }

// PopMaintenance reports whether pop maintenance is on, as last read.
func (f *Flags) PopMaintenance() bool { return f.popMaintenance.Load() }

// Known reports whether the switches have been read at least once: until
// then they read off whatever the database holds.
func (f *Flags) Known() bool { return f.known.Load() }

// State is both switches.
type State struct{ Maintenance, PopMaintenance bool }

// Read reads the switches from the database, and remembers them.
func (f *Flags) Read(ctx context.Context) (State, error) {
	var s State
	err := f.pool.QueryRow(ctx, `SELECT coalesce(bool_or(enabled) FILTER (WHERE name = $1), false),
			coalesce(bool_or(enabled) FILTER (WHERE name = $2), false)
		  FROM queen.system_flags WHERE name IN ($1, $2)`, Maintenance, PopMaintenance).Scan(&s.Maintenance, &s.PopMaintenance)
	if err != nil {
		return State{}, fmt.Errorf("read system flags: %w", err)
	}
	f.maintenance.Store(s.Maintenance)
	f.popMaintenance.Store(s.PopMaintenance)
	f.known.Store(true)
	return s, nil
}

// Set turns the switch name on or off for the whole cluster and returns the
// switches as they now stand. The NOTIFY goes with the commit: switches
// change rarely, so its commit-time lock costs nothing.
func (f *Flags) Set(ctx context.Context, name string, on bool) (State, error) {
	err := pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO queen.system_flags (name, enabled) VALUES ($1, $2)
			ON CONFLICT (name) DO UPDATE SET enabled = EXCLUDED.enabled, updated_at = now()`, name, on); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, Channel)
		return err
	})
	if err != nil {
		return State{}, fmt.Errorf("set system flag %s: %w", name, err)
	}
	return f.Read(ctx)
}

// Run keeps the switches current until ctx ends: a LISTEN on Channel on a
// connection of its own, and a re-read every Reread.
func (f *Flags) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { pg.Listen(ctx, f.pool, Channel, Reread, f.log, "system flags", f.reread) })
	t := time.NewTicker(Reread)
	defer t.Stop()
	for {
		f.reread(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (f *Flags) reread(ctx context.Context) {
	if _, err := f.Read(ctx); err != nil && ctx.Err() == nil {
		f.log.Warn("system flags: re-read failed", "err", err)
	}
}
