package poll_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/regent-mq/regent/test/poll"
)

// recorder is a test whose Fatalf ends its goroutine, as testing's does.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls Eventually as a test of its own and returns how it failed.
func run(within time.Duration, check func() error) string {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		poll.Eventually(r, within, check)
	}()
	<-done
	return r.failed
}

func TestEventuallyReturnsOnceTheCheckHolds(t *testing.T) {
	calls := 0
	failed := run(10*time.Second, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if failed != "" || calls != 3 {
		t.Fatalf("failed %q after %d calls, want success on the third", failed, calls)
	}
}

func TestEventuallyFailsWithTheLastErrorOnceItsTimeIsUp(t *testing.T) {
	start := time.Now()
	failed := run(50*time.Millisecond, func() error { return errors.New("never") })
	if failed != "not within 50ms: never" {
		t.Fatalf("failed %q", failed)
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before its time", took)
	}
}

func TestUntilReturnsTheLastErrorOnceItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	calls := 0
	err := poll.Until(ctx, func() error {
		if calls++; calls == 3 {
			cancel()
		}
		return fmt.Errorf("call %d", calls)
	})
	if err == nil || err.Error() != "call 3" {
		t.Fatalf("Until returned %v after %d calls, want call 3's error", err, calls)
	}
}
