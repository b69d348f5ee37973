package admin_test

import (
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// start starts a broker whose hot list is never reseeded during a test, so
// that a pop finds a partition only when something announced it.
func start(t *testing.T, opts ...brokertest.Option) *brokertest.Broker {
	t.Helper()
	return brokertest.Start(t, append([]brokertest.Option{func(c *config.Config) { c.ReseedInterval = time.Hour }}, opts...)...)
}

func array(t *testing.T, r brokertest.Response) []map[string]any {
	t.Helper()
	var out []map[string]any
	r.JSON(t, &out)
	return out
}
