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
	brokertest.Eventually(t, 10*time.Second, func() error {
		if body := b.Scrape(t); !strings.Contains(body, "\n"+line+"\n") {
			return fmt.Errorf("/metrics does not hold %s:\n%s", line, body)
		}
		return nil
	})
}

func TestStreamCyclesAreCountedByTenantAndOutcomeAndTimed(t *testing.T) {
	t.Parallel()
	// The figures are the whole broker's, so it keeps a broker of its own.
	f := fixtureOn(t, start(t))
	committed(t, f.b, f.body(nil))
	committed(t, f.b, f.body(nil))
	refused(t, f.b, f.body(map[string]any{"ack": ack(uuid.NewString(), "completed", 1)}), "no lease")
	waitForMetric(t, f.b, fmt.Sprintf(`regent_streams_cycles_total{outcome="committed",tenant=%q} 2`, f.b.Tenant))
	waitForMetric(t, f.b, fmt.Sprintf(`regent_streams_cycles_total{outcome="refused",tenant=%q} 1`, f.b.Tenant))
	waitForMetric(t, f.b, `regent_streams_cycle_duration_seconds_count{outcome="committed"} 2`)
	waitForMetric(t, f.b, `regent_streams_cycle_duration_seconds_count{outcome="refused"} 1`)
	waitForMetric(t, f.b, "regent_streams_active_queries 1")
}

func TestStateOpsOfCommittedCyclesAreCountedByType(t *testing.T) {
	t.Parallel()
	// The figures are the tenant's: the test is a tenant of its own.
	f := fixtureOn(t, alone(t))
	committed(t, f.b, f.body(map[string]any{"state_ops": []any{
		map[string]any{"type": "upsert", "key": "a", "value": 1},
		map[string]any{"type": "upsert", "key": "b", "value": 2},
		map[string]any{"type": "upsert", "key": "c", "value": 3},
		map[string]any{"type": "delete", "key": "c"}, // a key's last op is what is written
	}}))
	// A refused cycle writes no state, and counts none.
	refused(t, f.b, f.body(map[string]any{"ack": ack(uuid.NewString(), "completed", 1), "state_ops": []any{
		map[string]any{"type": "upsert", "key": "d", "value": 1}}}), "no lease")
	waitForMetric(t, f.b, fmt.Sprintf(`regent_streams_state_ops_total{tenant=%q,type="upsert"} 2`, f.b.Tenant))
	waitForMetric(t, f.b, fmt.Sprintf(`regent_streams_state_ops_total{tenant=%q,type="delete"} 1`, f.b.Tenant))
}

// The alert on a query whose cycles are refused in a row reads this gauge:
// it counts the refusals since the last commit, and its series goes with
// the next commit.
func TestRefusedInARowCountsAQuerysRefusalsUntilOneCommits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	series := fmt.Sprintf(`regent_streams_query_refused_in_a_row{query=%q,tenant=%q}`, f.query, f.b.Tenant)
	for range 3 {
		refused(t, f.b, f.body(map[string]any{"ack": ack(uuid.NewString(), "completed", 1)}), "no lease")
	}
	waitForMetric(t, f.b, series+" 3")
	committed(t, f.b, f.body(nil))
	brokertest.Eventually(t, 10*time.Second, func() error {
		if strings.Contains(f.b.Scrape(t), series) {
			return fmt.Errorf("%s is still there after a commit", series)
		}
		return nil
	})
	refused(t, f.b, f.body(map[string]any{"ack": ack(uuid.NewString(), "completed", 1)}), "no lease")
	waitForMetric(t, f.b, series+" 1")
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
