package brokertest

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// Group is one broker for the tests of a package that need options other
// than Main's: declared once per configuration, at package level, started
// by its first test on the package's database, and stopped by Main. Each
// test on it gets a namespace of its own, as on Shared. A test that reads
// figures of the whole broker (its metrics, its notifications) on a group
// runs without t.Parallel, so that it has the broker to itself.
//
//	var traced = brokertest.NewGroup(brokertest.WithTraceparents)
//	…
//	b := traced.Broker(t)
type Group struct {
	opts []Option
	once sync.Once
	b    *Broker
	dir  string
	err  error
}

// groups are the package's groups, for Main to stop.
var groups struct {
	sync.Mutex
	all []*Group
}

// NewGroup declares a broker configured with Main's options, then opts.
func NewGroup(opts ...Option) *Group {
	g := &Group{opts: opts}
	groups.Lock()
	defer groups.Unlock()
	groups.all = append(groups.all, g)
	return g
}

// Broker gives the test the group's broker, started on first use, in a
// namespace of the test's own.
func (g *Group) Broker(t testing.TB) *Broker {
	t.Helper()
	if !shared.main {
		t.Fatal("brokertest: a Group needs the package's TestMain to be brokertest.Main")
	}
	g.once.Do(func() { g.b, g.dir, g.err = launchShared(append(append([]Option(nil), shared.opts...), g.opts...)) })
	if g.err != nil {
		t.Fatalf("brokertest: group broker: %v", g.err)
	}
	return namespace(t, g.b)
}

// stopGroups stops the groups' brokers that started, and turns a passing
// code into a failing one when one of them failed.
func stopGroups(code int) int {
	groups.Lock()
	defer groups.Unlock()
	for _, g := range groups.all {
		if g.b == nil {
			continue
		}
		if err := g.b.halt(); err != nil {
			fmt.Fprintf(os.Stderr, "brokertest: group broker: %v\n", err)
			code = 1
		}
		os.RemoveAll(g.dir)
	}
	return code
}

// Replica starts another broker on b's database, configured by opts, that
// acts in b's namespace (its queues, its tenant and token): a replica
// beside b, or a broker of another configuration reading what b wrote. It
// stops when the test ends.
func (b *Broker) Replica(t testing.TB, opts ...Option) *Broker {
	t.Helper()
	r := StartOn(t, b.DatabaseURL, opts...)
	r.prefix, r.Tenant, r.Token, r.Subject = b.prefix, b.Tenant, b.Token, b.Subject
	return r
}
