package brokertest

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/auth"
	"github.com/regent-mq/regent/test/pgtest"
)

// The package's shared broker: started by the first Shared, stopped by Main.
var shared struct {
	main bool
	opts []Option
	once sync.Once
	b    *Broker
	dir  string
	err  error
	seq  atomic.Int64
}

// Main runs a package's tests with one broker that they share (Shared),
// configured by opts, then stops it and the throwaway cluster, and fails
// the package when goroutines are left running (pgtest.NoLeaks):
//
//	func TestMain(m *testing.M) { brokertest.Main(m) }
func Main(m *testing.M, opts ...Option) {
	shared.main, shared.opts = true, opts
	code := stopGroups(m.Run())
	if shared.b != nil {
		if err := shared.b.halt(); err != nil {
			fmt.Fprintf(os.Stderr, "brokertest: shared broker: %v\n", err)
			code = 1
		}
		os.RemoveAll(shared.dir)
	}
	pgtest.Stop()
	os.Exit(pgtest.NoLeaks(code))
}

// Shared gives the test the package's broker, started on first use with
// Main's options, in a namespace of the test's own: its queues are named
// by Q, and in secure mode it acts as a tenant of its own. Starting a
// broker on a fresh database costs far more than most tests; a namespace
// costs nothing. A test that needs other options, a broker it can stop, or
// figures of the whole broker (its metrics, every queue of a tenant with
// tenancy off) starts its own with Start.
func Shared(t testing.TB) *Broker {
	t.Helper()
	if !shared.main {
		t.Fatal("brokertest: Shared needs the package's TestMain to be brokertest.Main")
	}
	shared.once.Do(func() { shared.b, shared.dir, shared.err = launchShared(shared.opts) })
	if shared.err != nil {
		t.Fatalf("brokertest: shared broker: %v", shared.err)
	}
	return namespace(t, shared.b)
}

// launchShared starts a broker on the package's database, spooling under
// a directory of its own, which it returns.
func launchShared(opts []Option) (*Broker, string, error) {
	url, err := pgtest.SharedURL()
	if err != nil {
		return nil, "", err
	}
	dir, err := os.MkdirTemp("", "brokertest-spool-")
	if err != nil {
		return nil, "", err
	}
	b, err := launch(url, dir, opts)
	return b, dir, err
}

// namespace is base seen by a test in a namespace of its own: its queues
// are named by Q, and with tenancy on it acts as a tenant of its own.
func namespace(t testing.TB, base *Broker) *Broker {
	n := shared.seq.Add(1)
	b := *base
	b.prefix = fmt.Sprintf("t%d-", n)
	if b.Config.Tenancy { // secure mode, or the options turned it on
		b.Tenant = fmt.Sprintf("t%d", n)
		b.Token, b.Subject = Mint(t, b.Tenant, auth.Admin), "test-"+b.Tenant
	}
	b.stop = func() { t.Fatal("brokertest: a shared broker is not the test's to stop") }
	return &b
}

// Q is the name of the test's queue called name: name itself on a broker
// of the test's own, and name within the test's namespace on a shared one.
func (b *Broker) Q(name string) string { return b.prefix + name }

// Eventually calls check, on the test's goroutine, until it returns nil,
// and fails the test with check's last error once within has passed. It
// is how a test waits for something that happens in the background: for
// the event, never for a fixed time.
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
