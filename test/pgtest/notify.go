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

// Heard collects the payloads conn receives, with how many times each
// came: it waits as long as it takes (up to 30 s) for want of them, then
// until none arrives for quiet. Waiting for what is expected, not for a
// quiet spell, keeps a loaded machine from passing off a late
// notification as a missing one; the quiet spell after it still catches a
// duplicate or an announcement that should not have been made.
func Heard(t testing.TB, conn *pgx.Conn, want int, quiet time.Duration) map[string]int {
	t.Helper()
	got := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; ; n++ {
		wait := quiet
		if n < want {
			wait = time.Until(deadline)
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		note, err := conn.WaitForNotification(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return got
		}
		if err != nil {
			t.Fatalf("pgtest: wait for a notification: %v", err)
		}
		got[note.Payload]++
	}
}
