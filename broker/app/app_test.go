package app_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/pg/migrate"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

// The brokers that the package's tests share, one per configuration other
// than the package's (Shared), each test in a tenant or namespace of its
// own.
var (
	// tenants has auth and tenancy on in either mode, and flushes its
	// counters every 20 ms, so that the analytics meet them soon.
	tenants = brokertest.NewGroup(brokertest.WithJWT(true), func(c *config.Config) { c.AnalyticsFlush = 20 * time.Millisecond })
	// authNoTenancy has auth on and tenancy off.
	authNoTenancy = brokertest.NewGroup(brokertest.WithJWT(false))
	// timeouts gives clients 300 ms for headers, for a body and between
	// requests.
	timeouts = brokertest.NewGroup(shortTimeouts)
)

func TestTwoBrokersStartingTogetherMigrateOnce(t *testing.T) {
	url := pgtest.EmptyURL(t)
	var wg sync.WaitGroup
	brokers := make([]*brokertest.Broker, 2)
	for i := range brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			brokers[i] = brokertest.StartOn(t, url)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, b := range brokers {
		if r := b.Do(t, "GET", "/health", "", nil); r.Status != 200 {
			t.Fatalf("broker %d health = %d %s", i, r.Status, r.Body)
		}
	}
	all, err := migrate.All()
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := brokers[0].DB.Migrations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int, len(all))
	for i, m := range all {
		want[i] = m.Version
	}
	if !slices.Equal(recorded, want) {
		t.Fatalf("recorded migrations %v, want each of %v exactly once", recorded, want)
	}
}
