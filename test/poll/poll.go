// Package poll is how a test waits for something that happens in the
// background: for the event, never for a fixed time. It imports nothing of
// Regent's, so that any package's tests can use it, the ones below
// test/brokertest too (brokertest.Eventually is this).
package poll

import (
	"context"
	"testing"
	"time"
)

// Eventually calls check, on the test's goroutine, until it returns nil,
// and fails the test with check's last error once within has passed.
func Eventually(t testing.TB, within time.Duration, check func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := Until(ctx, check); err != nil {
		t.Fatalf("not within %s: %v", within, err)
	}
}

// Until calls check until it returns nil, or until ctx ends, and then
// returns check's last error: Eventually's loop, for a wait off the test's
// goroutine (which may not fail the test) or one that reports more than
// check's error when it gives up.
func Until(ctx context.Context, check func() error) error {
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
	}
}
