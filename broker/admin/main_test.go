package admin_test

import (
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/brokertest"
)

func TestMain(m *testing.M) { brokertest.Main(m, quietHotList) }

// quietHotList never reseeds the hot list during a test, so that a pop
// finds a partition only when something announced it.
func quietHotList(c *config.Config) { c.ReseedInterval = time.Hour }

// start starts a broker of the test's own with a quiet hot list, as the
// shared one has.
func start(t *testing.T, opts ...brokertest.Option) *brokertest.Broker {
	t.Helper()
	return brokertest.Start(t, append([]brokertest.Option{quietHotList}, opts...)...)
}

func array(t *testing.T, r brokertest.Response) []map[string]any {
	t.Helper()
	var out []map[string]any
	r.JSON(t, &out)
	return out
}
