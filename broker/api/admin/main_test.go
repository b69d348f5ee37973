package admin_test

import (
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/brokertest"
)

// shared names the shared broker in the analytics it writes.
const shared = "admin-shared"

// The shared broker runs with tenancy on in either mode, so that each test
// is a tenant of its own: the admin routes answer tenant-wide (every queue,
// counter, trace and lifetime figure of the tenant), and a tenant is the
// namespace they cannot see past. It flushes its counters every 50 ms, as
// fastFlush does.
func TestMain(m *testing.M) {
	brokertest.Main(m, quietHotList, fastFlush(shared), brokertest.WithJWT(true))
}

// quietHotList never reseeds the hot list during a test, so that a pop
// finds a partition only when something announced it.
func quietHotList(c *config.Config) { c.ReseedInterval = time.Hour }

// start starts a broker of the test's own with a quiet hot list, as the
// shared one has: for a test that changes the whole broker (maintenance),
// or reads or writes what is the database's rather than a tenant's
// (replica samples, the retention sweep).
func start(t testing.TB, opts ...brokertest.Option) *brokertest.Broker {
	t.Helper()
	return brokertest.Start(t, append([]brokertest.Option{quietHotList}, opts...)...)
}

func array(t *testing.T, r brokertest.Response) []map[string]any {
	t.Helper()
	var out []map[string]any
	r.JSON(t, &out)
	return out
}
