// Package poll is how a test waits for something that happens in the
// background: for the event, never for a fixed time. It imports nothing of
// Regent's, so that any package's tests can use it, the ones below
// test/brokertest too (brokertest.Eventually is this).
package poll

import (
	"testing"
	"time"
)

// Eventually calls check, on the test's goroutine, until it returns nil,
// and fails the test with check's last error once within has passed.
func Eventually(t testing.TB, within time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %v", within, err)
		}
		time.Sleep(pause)
	}
}
