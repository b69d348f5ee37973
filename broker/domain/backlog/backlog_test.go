package backlog_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/domain/backlog"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/test/brokertest"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// consume pops and auto-acks n messages of the partition for the group.
func consume(t *testing.T, b *brokertest.Broker, queue, partition, group string, n int) {
	t.Helper()
	path := fmt.Sprintf("/api/v1/pop/queue/%s/partition/%s?consumerGroup=%s&batch=%d&autoAck=true", queue, partition, group, n)
	if r := b.Do(t, "GET", path, "", nil); r.Status != http.StatusOK {
		t.Fatalf("pop %s: %d %s", path, r.Status, r.Body)
	}
}

// read reads the backlog of the test's namespace: the groups of its
// tenant's queues named by b.Q, by queue name without the namespace and
// group.
func read(t *testing.T, b *brokertest.Broker) map[string]db.BacklogGroup {
	t.Helper()
	s, err := db.New(b.Pool).Backlog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]db.BacklogGroup{}
	for _, g := range s.Groups {
		if name, ok := strings.CutPrefix(g.Queue, b.Q("")); ok && g.Tenant == b.Tenant {
			out[name+"/"+g.Group] = g
		}
	}
	return out
}

func near(got, want float64) bool { return math.Abs(got-want) < 60 }

func TestLagIsEachPartitionsNextOffsetMinusTheGroupsCommittedSummed(t *testing.T) {
	b := brokertest.Shared(t)
	orders := b.Q("orders")
	b.PushN(t, orders, "a", 0, 5)
	b.PushN(t, orders, "b", 0, 3)
	consume(t, b, orders, "a", "billing", 2)
	consume(t, b, orders, "b", "billing", 3)
	consume(t, b, orders, "a", "audit", 1)

	gs := read(t, b)
	if g := gs["orders/billing"]; g.Lag != 3 || g.Tenant != b.Tenant {
		t.Errorf("billing: %+v, want lag 3 ((5-2) + (3-3)) of tenant %q", g, b.Tenant)
	}
	// audit has a cursor on a only: partitions it never popped are not its lag yet.
	if g := gs["orders/audit"]; g.Lag != 4 {
		t.Errorf("audit: %+v, want lag 4", g)
	}
	if len(gs) != 2 {
		t.Errorf("groups %v, want billing and audit", gs)
	}
}

func TestOldestUnconsumedAgeIsTheAgeOfTheSegmentAtTheCursor(t *testing.T) {
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.PushN(t, q, "p", 0, 2) // offsets 0-1
	b.Age(t, q, time.Hour)
	b.PushN(t, q, "p", 0, 2) // offsets 2-3
	b.Age(t, q, time.Hour)   // 2 h and 1 h old

	consume(t, b, q, "p", "g", 1)
	if g := read(t, b)["q/g"]; g.Lag != 3 || !near(g.OldestAgeSeconds, 7200) {
		t.Errorf("inside the first segment: %+v, want lag 3 and age about 7200 s", g)
	}
	consume(t, b, q, "p", "g", 1)
	if g := read(t, b)["q/g"]; g.Lag != 2 || !near(g.OldestAgeSeconds, 3600) {
		t.Errorf("at the second segment: %+v, want lag 2 and age about 3600 s", g)
	}
	consume(t, b, q, "p", "g", 2)
	if g := read(t, b)["q/g"]; g.Lag != 0 || g.OldestAgeSeconds != 0 {
		t.Errorf("caught up: %+v, want lag 0 and age 0", g)
	}
}

func TestOldestUnconsumedAgeSkipsASegmentThatRetentionRemoved(t *testing.T) {
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.PushN(t, q, "p", 0, 2)
	b.Age(t, q, time.Hour)
	b.PushN(t, q, "p", 0, 2)
	b.Age(t, q, time.Hour) // 2 h and 1 h old
	consume(t, b, q, "p", "g", 1)
	b.DropSegment(t, q, 0)
	if g := read(t, b)["q/g"]; g.Lag != 3 || !near(g.OldestAgeSeconds, 3600) {
		t.Errorf("%+v, want lag 3 (offsets count, deleted or not) and the next segment's age, about 3600 s", g)
	}
}

func TestScrapesServeTheLastRefreshAndAGoneQueueDisappears(t *testing.T) {
	b := brokertest.Start(t) // it counts every series of the database
	b.PushN(t, "q", "p", 0, 4)
	consume(t, b, "q", "p", "g", 1)
	m := metrics.New()
	c := backlog.New(db.New(b.Pool), m, quiet)
	if !c.Refresh(t.Context()) {
		t.Fatal("refresh failed")
	}
	want := fmt.Sprintf(`regent_consumer_group_lag{group="g",queue="q",tenant=%q} 3`, b.Tenant)
	if s := scrape(t, m); !strings.Contains(s, want) {
		t.Fatalf("scrape lacks %s:\n%s", want, s)
	}
	b.PushN(t, "q", "p", 0, 4)
	if s := scrape(t, m); !strings.Contains(s, want) {
		t.Fatalf("a scrape between refreshes changed the lag, so it read the database:\n%s", s)
	}
	b.Call(t, http.StatusOK, "DELETE", "/api/v1/resources/queues/q", nil)
	c.Refresh(t.Context())
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Fatalf("%d series left after the queue was deleted", n)
	}
}

func TestDatabaseUpIsZeroWhenTheRefreshFails(t *testing.T) {
	// A port nobody listens on: pgxpool connects lazily, so the refresh fails.
	pool, err := pgxpool.New(context.Background(), "postgres://regent@127.0.0.1:1/none?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	m := metrics.New()
	m.DatabaseUp.Set(1)
	if backlog.New(db.New(pool), m, quiet).Refresh(t.Context()) {
		t.Fatal("a refresh against no database succeeded")
	}
	if v := testutil.ToFloat64(m.DatabaseUp); v != 0 {
		t.Fatalf("regent_database_up = %v, want 0", v)
	}
}

func TestTheBrokerRefreshesTheLagInTheBackground(t *testing.T) {
	b := brokertest.Start(t, func(c *config.Config) { c.LagEvery = 20 * time.Millisecond })
	b.PushN(t, "q", "p", 0, 3)
	consume(t, b, "q", "p", "g", 1)
	want := fmt.Sprintf(`regent_consumer_group_lag{group="g",queue="q",tenant=%q} 2`, b.Tenant)
	brokertest.Eventually(t, 10*time.Second, func() error {
		if m := b.Scrape(t); !strings.Contains(m, want) || !strings.Contains(m, "regent_database_up 1") {
			return fmt.Errorf("/metrics does not show %s and regent_database_up 1:\n%s", want, m)
		}
		return nil
	})
}

// scrape serves m's registry as the broker does and reads it.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			var ls []string
			for _, l := range s.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			fmt.Fprintf(&b, "%s{%s} %v\n", mf.GetName(), strings.Join(ls, ","), s.GetGauge().GetValue())
		}
	}
	return b.String()
}

func TestDeadLettersAreCountedPerQueue(t *testing.T) {
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.PushN(t, q, "p", 0, 3)
	r := b.Do(t, "GET", "/api/v1/pop/queue/"+q+"/partition/p?consumerGroup=g&batch=3", "", nil)
	var p struct {
		Messages []struct {
			TransactionID string `json:"transactionId"`
			PartitionID   string `json:"partitionId"`
		} `json:"messages"`
	}
	r.JSON(t, &p)
	for _, m := range p.Messages[:2] {
		a := b.Do(t, "POST", "/api/v1/ack", "", map[string]any{
			"transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": "dlq", "consumerGroup": "g"})
		if a.Status != http.StatusOK {
			t.Fatalf("ack dlq: %d %s", a.Status, a.Body)
		}
	}
	s, err := db.New(b.Pool).Backlog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []db.BacklogDeadLetters
	for _, l := range s.DeadLetters {
		if strings.HasPrefix(l.Queue, b.Q("")) && l.Tenant == b.Tenant {
			got = append(got, l)
		}
	}
	want := db.BacklogDeadLetters{Tenant: b.Tenant, Queue: q, Count: 2}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("dead letters %+v, want %+v", got, want)
	}
}

func TestARefreshRecordsEachGroupsLagAsItsMinutesSampleForTheCharts(t *testing.T) {
	b := brokertest.Shared(t)
	charted := b.Q("charted")
	b.PushN(t, charted, "p", 0, 4)
	consume(t, b, charted, "p", "g", 1)
	b.Age(t, charted, 90*time.Second)
	if !backlog.New(db.New(b.Pool), metrics.New(), quiet).Refresh(t.Context()) {
		t.Fatal("refresh failed")
	}
	samples, err := b.DB.LagSamples(t.Context(), b.Tenant, charted, "g")
	if err != nil || len(samples) == 0 || time.Since(samples[0].Minute) > 2*time.Minute {
		t.Fatalf("no sample of g's lag this minute: %+v, %v", samples, err)
	}
	if s := samples[0]; s.Lag != 3 || !near(s.LagSeconds, 90) {
		t.Fatalf("sample: lag %d, %v s; want 3 and about 90 s", s.Lag, s.LagSeconds)
	}
}
