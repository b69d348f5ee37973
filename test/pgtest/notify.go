package pgtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen opens a connection of its own to url that LISTENs on channel, as
// another broker replica's listener does (NOTIFY reaches the listeners of
// one database). It closes when the test ends.
func Listen(t testing.TB, url, channel string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatalf("pgtest: connect to listen: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(context.Background(), "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatalf("pgtest: LISTEN %s: %v", channel, err)
	}
	return conn
}

// Heard collects the payloads conn receives until none arrives for quiet,
// with how many times each came.
func Heard(t testing.TB, conn *pgx.Conn, quiet time.Duration) map[string]int {
	t.Helper()
	got := map[string]int{}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), quiet)
		n, err := conn.WaitForNotification(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return got
		}
		if err != nil {
			t.Fatalf("pgtest: wait for a notification: %v", err)
		}
		got[n.Payload]++
	}
}
