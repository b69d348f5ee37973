package brokertest

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/test/pgtest"
	"github.com/regent-mq/regent/test/poll"
)

// The package's shared brokers: Main's (Shared) and the groups', each
// started by its first test, all stopped by Main.
var shared struct {
	main    bool
	pkg     Group
	seq     atomic.Int64
	mu      sync.Mutex
	started []*Group
}

// Main runs a package's tests with one broker that they share (Shared),
// configured by opts, then stops it, the groups' brokers and the throwaway
// cluster, and fails the package when goroutines are left running
// (pgtest.NoLeaks):
//
//	func TestMain(m *testing.M) { brokertest.Main(m) }
func Main(m *testing.M, opts ...Option) { os.Exit(pgtest.NoLeaks(Run(m, opts...))) }

// Run is Main for a TestMain that has more to stop before the check for
// goroutines left running (a browser, say): it runs the tests with the
// shared brokers, stops them and the throwaway cluster, and returns the
// exit code.
func Run(m *testing.M, opts ...Option) int {
	shared.main, shared.pkg.opts = true, opts
	code := m.Run()
	shared.mu.Lock()
	for _, g := range shared.started {
		if err := g.b.halt(); err != nil {
			fmt.Fprintf(os.Stderr, "brokertest: shared broker: %v\n", err)
			code = 1
		}
		os.RemoveAll(g.dir)
		if g.after != nil {
			g.after()
		}
	}
	shared.mu.Unlock()
	pgtest.Stop()
	return code
}

// Shared gives the test the package's broker, started on first use with
// Main's options, in a namespace of the test's own: its queues are named
// by Q, and with tenancy on (secure mode, or WithJWT(true) among Main's
// options) it acts as a tenant of its own. Starting a
// broker on a fresh database costs far more than most tests; a namespace
// costs nothing. A test that needs other options shares a Group's broker;
// one that needs a broker it can stop, or figures of the whole broker
// (its metrics, every queue of a tenant with tenancy off), starts its own
// with Start.
func Shared(t testing.TB) *Broker {
	t.Helper()
	return shared.pkg.Shared(t)
}

// A Group is a broker shared by the tests of a package that need the same
// options, other than Main's, each on a fresh database. Declare
// one per configuration, at package level:
//
//	var slow = brokertest.NewGroup(shortTimeouts)
//	...
//	b := slow.Shared(t)
type Group struct {
	opts  []Option
	setup func() ([]Option, func(), error)
	after func() // stops what setup started
	once  sync.Once
	b     *Broker
	dir   string
	err   error
}

// NewGroup declares a broker configured by opts, started by the first test
// that asks for it and stopped by Main.
func NewGroup(opts ...Option) *Group { return &Group{opts: opts} }

// NewGroupWith declares a broker whose options need something running
// first, an identity provider say: setup starts it as the broker starts
// and returns the options, and a stop that Main calls after the broker's.
func NewGroupWith(setup func() (opts []Option, stop func(), err error)) *Group {
	return &Group{setup: setup}
}

// Shared gives the test g's broker in a namespace of the test's own, as the
// package's Shared does.
func (g *Group) Shared(t testing.TB) *Broker {
	t.Helper()
	if !shared.main {
		t.Fatal("brokertest: a shared broker needs the package's TestMain to be brokertest.Main")
	}
	g.once.Do(func() {
		url, err := pgtest.SharedURL()
		if err != nil {
			g.err = err
			return
		}
		if g.dir, err = os.MkdirTemp("", "brokertest-spool-"); err != nil {
			g.err = err
			return
		}
		if g.setup != nil {
			var opts []Option
			if opts, g.after, g.err = g.setup(); g.err != nil {
				return
			}
			g.opts = append(g.opts, opts...)
		}
		if g.b, g.err = launch(url, g.dir, g.opts); g.err != nil {
			if g.after != nil {
				g.after()
			}
			return
		}
		shared.mu.Lock()
		shared.started = append(shared.started, g)
		shared.mu.Unlock()
	})
	if g.err != nil {
		t.Fatalf("brokertest: shared broker: %v", g.err)
	}
	n := shared.seq.Add(1)
	b := *g.b
	b.prefix = fmt.Sprintf("t%d-", n)
	if b.Config.Tenancy { // secure mode, or the options turned it on
		b.Tenant = fmt.Sprintf("t%d", n)
	}
	if b.Config.Auth == "jwt" && b.Config.JWTSecret == Secret {
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
// the event, never for a fixed time (see poll, for the packages that
// brokertest imports).
func Eventually(t testing.TB, within time.Duration, check func() error) {
	t.Helper()
	poll.Eventually(t, within, check)
}
