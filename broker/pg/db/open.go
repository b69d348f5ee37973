package db

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/pg/migrate"
)

// Options are how the broker's pool is opened.
type Options struct {
	MaxConns int // --pool-size
	// DedupWindow (--dedup-window) is how long a partition of a queue that
	// sets no dedupWindowSeconds remembers a client transactionId.
	DedupWindow time.Duration
	// Route (--citus-route) sends, on Citus, each hot call to the node that
	// holds its partition (WatchNodes reads where), rather than through
	// the coordinator.
	Route bool
}

// Open connects a pool to PostgreSQL at url. The pool drops connections the
// server has closed before a statement gets them. The DB owns the pool;
// Close releases it.
func Open(ctx context.Context, url string, o Options) (*DB, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	pc.MaxConns = int32(o.MaxConns)
	// Every statement the broker runs is short; JIT compilation only ever
	// adds to it (seconds, for the admin reads over 10,000 cursors).
	pc.ConnConfig.RuntimeParams["jit"] = "off"
	// queen.log_push_one_v1 reads it, only when a push repeats a recorded
	// id: a setting of the session, not one more argument of every cycle.
	// The push carries it too, for a call Citus delegates to a worker
	// (queen.log_push_v2).
	window := int32(o.DedupWindow / time.Second)
	pc.ConnConfig.RuntimeParams[DedupWindowSetting] = strconv.Itoa(int(window))
	pc.PrepareConn = dropClosed
	base := pc.Copy()
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	d := New(pool)
	d.dedupWindow = &window
	if o.Route {
		d.nodes = &nodes{base: base, pools: map[string]*pgxpool.Pool{}}
	}
	return d, nil
}

// DedupWindowSetting is the session setting that carries Options.DedupWindow,
// in whole seconds.
const DedupWindowSetting = "regent.dedup_window_seconds"

// Close closes the pools, waiting for their connections to be released.
func (d *DB) Close() {
	d.nodes.close()
	d.pool.Close()
}

// Migrate applies the schema migrations not applied yet and returns how
// many it applied.
func (d *DB) Migrate(ctx context.Context, log *slog.Logger) (int, error) {
	return migrate.Up(ctx, d.pool, log)
}

// Migrated reports whether the schema has every migration this build needs;
// an error means PostgreSQL did not answer.
func (d *DB) Migrated(ctx context.Context) (bool, error) {
	return migrate.Current(ctx, d.pool)
}

// dropClosed is the pool's PrepareConn hook: it refuses a pooled connection
// that PostgreSQL has already closed. A server that restarts, or ends a
// backend, sends a FATAL message and closes the socket, but the idle
// connection only learns of it on its next query, which then fails with
// SQLSTATE 57P01 after the server is back. pgxpool pings only connections
// idle for more than a second, and a ping on every acquire would cost every
// request a round trip; a peek at the socket costs one system call.
func dropClosed(_ context.Context, c *pgx.Conn) (bool, error) {
	return !closedByServer(c.PgConn().Conn()), nil
}

// closedByServer reports whether the server has closed nc or sent it
// anything unasked: an idle connection has nothing to read.
func closedByServer(nc net.Conn) bool {
	for {
		inner, ok := nc.(interface{ NetConn() net.Conn }) // TLS
		if !ok {
			break
		}
		nc = inner.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var closed bool
	var b [1]byte
	// Control, not Read: pgconn's background reader may hold the read lock
	// in a blocking read. The peek neither waits nor takes what it sees.
	err = raw.Control(func(fd uintptr) {
		n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = n > 0 || rerr == nil || !errors.Is(rerr, syscall.EAGAIN)
	})
	return err == nil && closed
}
