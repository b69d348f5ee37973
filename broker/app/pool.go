package app

import (
	"context"
	"errors"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5"
)

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
