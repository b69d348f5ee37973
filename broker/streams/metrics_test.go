package streams_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/test/brokertest"
)

// waitForMetric scrapes /metrics until it holds the line, for at most 10 s.
func waitForMetric(t *testing.T, b *brokertest.Broker, line string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		body := b.Scrape(t)
		if strings.Contains(body, "\n"+line+"\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never held %s:\n%s", line, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStreamCyclesAreCountedByTenantAndResult(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	committed(t, f.b, f.body(nil))
	committed(t, f.b, f.body(nil))
	refused(t, f.b, f.body(map[string]any{"ack": ack(uuid.NewString(), "completed", 1)}), "no lease")
	waitForMetric(t, f.b, fmt.Sprintf(`regent_stream_cycles_total{result="committed",tenant=%q} 2`, f.b.Tenant))
	waitForMetric(t, f.b, fmt.Sprintf(`regent_stream_cycles_total{result="refused",tenant=%q} 1`, f.b.Tenant))
}

func TestParkedPopsAreCountedWhileTheyWait(t *testing.T) {
	t.Parallel()
	b := start(t)
	got := parkedPop(b, "parked", "")
	waitForMetric(t, b, "regent_pops_parked 1")
	b.PushN(t, "parked", "", 0, 1)
	if p := <-got; p == nil || len(p.Messages) != 1 {
		t.Fatalf("the parked pop answered %+v, want the pushed message", p)
	}
	waitForMetric(t, b, "regent_pops_parked 0")
}
