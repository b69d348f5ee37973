// Package flags holds the broker's cluster-wide switches, push maintenance
// and pop maintenance (queue-admin-api.md §7). They live in the database, so
// they survive restarts, and every replica keeps a copy in memory that the
// hot paths read for free: a NOTIFY brings a change at once, and a re-read
// every second bounds the delay when a notification is lost.
package flags

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/regent-mq/regent/broker/pg/db"
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
	db             *db.DB
	log            *slog.Logger
	maintenance    atomic.Bool
	popMaintenance atomic.Bool
	known          atomic.Bool
}

// New returns Flags reading through store, all off until the first read.
func New(store *db.DB, log *slog.Logger) *Flags {
	return &Flags{db: store, log: log}
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
	on, err := f.db.SystemFlags(ctx, Maintenance, PopMaintenance)
	if err != nil {
		return State{}, err
	}
	s := State{Maintenance: on[0], PopMaintenance: on[1]}
	f.maintenance.Store(s.Maintenance)
	f.popMaintenance.Store(s.PopMaintenance)
	f.known.Store(true)
	return s, nil
}

// Set turns the switch name on or off for the whole cluster and returns the
// switches as they now stand. The NOTIFY goes with the commit: switches
// change rarely, so its commit-time lock costs nothing.
func (f *Flags) Set(ctx context.Context, name string, on bool) (State, error) {
	if err := f.db.SetSystemFlag(ctx, name, on, Channel); err != nil {
		return State{}, err
	}
	return f.Read(ctx)
}

// Listen re-reads the switches on every NOTIFY on Channel until ctx ends,
// from a connection of its own.
func (f *Flags) Listen(ctx context.Context) {
	f.db.Listen(ctx, Channel, Reread, f.log, "system flags", f.reread)
}

// Run re-reads the switches every Reread, the first time at once, until ctx
// ends: what Listen misses while it reconnects.
func (f *Flags) Run(ctx context.Context) {
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
