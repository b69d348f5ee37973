package admin_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
)

// fastFlush makes a broker write its counters every 50 ms, and names it.
func fastFlush(replica string) brokertest.Option {
	return func(c *config.Config) { c.AnalyticsFlush, c.Replica = 50*time.Millisecond, replica }
}

// lastHour is a window around now, for reads that must see this minute.
func lastHour() string {
	now := time.Now().UTC()
	return "from=" + url.QueryEscape(now.Add(-59*time.Minute).Format(time.RFC3339)) +
		"&to=" + url.QueryEscape(now.Add(time.Minute).Format(time.RFC3339))
}

type opsSeries struct {
	Bucket         string  `json:"bucket"`
	QueueName      string  `json:"queueName"`
	PushRequests   int64   `json:"pushRequests"`
	PushMessages   int64   `json:"pushMessages"`
	PopMessages    int64   `json:"popMessages"`
	PopEmpty       int64   `json:"popEmpty"`
	AckRequests    int64   `json:"ackRequests"`
	AckSuccess     int64   `json:"ackSuccess"`
	AckFailed      int64   `json:"ackFailed"`
	Transactions   int64   `json:"transactions"`
	PartitionCount int64   `json:"partitionCount"`
	PartitionsMade int64   `json:"partitionsCreated"`
	AvgLagMs       int64   `json:"avgLagMs"`
	MaxLagMs       int64   `json:"maxLagMs"`
	PushPerSecond  float64 `json:"pushPerSecond"`
	ParkedCount    float64 `json:"parkedCount"`
}

type queueOps struct {
	BucketMinutes int         `json:"bucketMinutes"`
	Queues        []string    `json:"queues"`
	Series        []opsSeries `json:"series"`
}

// totals sums a queue's series.
func (o queueOps) totals(queue string) opsSeries {
	var t opsSeries
	for _, s := range o.Series {
		if s.QueueName != queue {
			continue
		}
		t.PushRequests += s.PushRequests
		t.PushMessages += s.PushMessages
		t.PopMessages += s.PopMessages
		t.PopEmpty += s.PopEmpty
		t.AckRequests += s.AckRequests
		t.AckSuccess += s.AckSuccess
		t.AckFailed += s.AckFailed
		t.Transactions += s.Transactions
		t.PartitionCount = s.PartitionCount
		t.MaxLagMs = max(t.MaxLagMs, s.MaxLagMs)
	}
	return t
}

// opsUntil reads queue-ops until done holds for it (5 s at most).
func opsUntil(t *testing.T, b *brokertest.Broker, query string, done func(queueOps) bool) queueOps {
	t.Helper()
	var o queueOps
	brokertest.Eventually(t, 5*time.Second, func() error {
		o = queueOps{}
		b.Call(t, http.StatusOK, "GET", "/api/v1/analytics/queue-ops?"+query, nil).JSON(t, &o)
		if !done(o) {
			return fmt.Errorf("queue-ops never got there: %+v", o)
		}
		return nil
	})
	return o
}

func TestQueueOpsCountsPushesPopsAcksEmptyPopsAndTransactionsPerQueue(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.PushN(t, "orders", "a", 0, 3)
	b.PushN(t, "orders", "b", 0, 2)
	b.PushN(t, "other", "Default", 0, 1)
	p := b.Pop(t, "/api/v1/pop/queue/orders/partition/a?batch=3")
	require.Len(t, p.Messages, 3)
	var acks []map[string]any
	b.Call(t, http.StatusOK, "POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": []any{
		map[string]any{"transactionId": p.Messages[0].TransactionID, "partitionId": p.PartitionID, "leaseId": p.LeaseID},
		map[string]any{"transactionId": "nope", "partitionId": p.PartitionID, "leaseId": p.LeaseID},
		map[string]any{"transactionId": p.Messages[2].TransactionID, "partitionId": p.PartitionID,
			"leaseId": "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f"},
	}}).JSON(t, &acks)
	require.Equal(t, []any{true, false, false}, []any{acks[0]["success"], acks[1]["success"], acks[2]["success"]})
	b.Pop(t, "/api/v1/pop/queue/orders/partition/a?batch=3") // leased: 204
	b.Pop(t, "/api/v1/pop/queue/none?batch=3")               // no such queue: 204 too
	b.Call(t, http.StatusOK, "POST", "/api/v1/transaction", map[string]any{"operations": []any{
		map[string]any{"type": "push", "items": []any{map[string]any{"queue": "orders", "payload": 1}}},
		map[string]any{"type": "push", "items": []any{map[string]any{"queue": "orders", "payload": 2}}}}})

	o := opsUntil(t, b, lastHour(), func(o queueOps) bool { return o.totals("orders").Transactions == 1 })
	require.Equal(t, 1, o.BucketMinutes)
	require.Equal(t, []string{"none", "orders", "other"}, o.Queues)
	got := o.totals("orders")
	require.EqualValues(t, 3, got.PushRequests, "two pushes and the transaction's, once for its two push operations")
	require.EqualValues(t, 7, got.PushMessages)
	require.EqualValues(t, 3, got.PopMessages)
	require.EqualValues(t, 1, got.PopEmpty)
	require.EqualValues(t, 1, got.AckRequests, "one ack/batch request")
	require.EqualValues(t, 1, got.AckSuccess)
	require.EqualValues(t, 1, got.AckFailed, "the wrong lease; the unknown message has no queue to count in")
	require.EqualValues(t, 3, got.PartitionCount, "a, b and the transaction's Default")
	require.Equal(t, opsSeries{PushRequests: 1, PushMessages: 1, PartitionCount: 1},
		opsSeries{PushRequests: o.totals("other").PushRequests, PushMessages: o.totals("other").PushMessages,
			PartitionCount: o.totals("other").PartitionCount})
	for _, s := range o.Series {
		require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:00Z$`, s.Bucket, "fixed-width second-precision UTC keys")
	}
}

// TestTwoReplicasOnOneDatabase starts the package's only brokers of their
// own: what replicas sample of themselves is the database's, not a
// tenant's, and its subtests age and forget it.
func TestTwoReplicasOnOneDatabase(t *testing.T) {
	t.Parallel()
	one := start(t, fastFlush("replica-1"))
	two := brokertest.StartOn(t, one.DatabaseURL, fastFlush("replica-2"), quietHotList)
	t.Run("CountersFlushedByBothAddUp", func(t *testing.T) { countersFlushedByTwoBrokersAddUp(t, one, two) })
	t.Run("StatusWorkersAreTheReplicasSampledInTheLastTwoMinutes", func(t *testing.T) { statusWorkersAreTheReplicasSampled(t, one, two) })
	t.Run("StatusWorkersHoldTheAnsweringReplicaBeforeItsFirstSample", func(t *testing.T) { statusWorkersHoldTheAnsweringReplica(t, one) })
}

func countersFlushedByTwoBrokersAddUp(t *testing.T, one, two *brokertest.Broker) {
	for i := range 3 {
		one.PushN(t, "orders", "Default", i, 2)
		two.PushN(t, "orders", "Default", 10+i, 1)
	}
	two.Pop(t, "/api/v1/pop/queue/orders?batch=4&autoAck=true")
	o := opsUntil(t, one, lastHour(), func(o queueOps) bool {
		g := o.totals("orders")
		return g.PushMessages == 9 && g.PopMessages == 4
	})
	require.EqualValues(t, 6, o.totals("orders").PushRequests, "three requests on each replica")

	var w struct {
		Summary map[string]int64 `json:"summary"`
	}
	one.Call(t, http.StatusOK, "GET", "/api/v1/analytics/worker-metrics?hostname=replica-2&"+lastHour(), nil).JSON(t, &w)
	require.EqualValues(t, 3, w.Summary["totalPushMessages"], "one replica's share")
	require.EqualValues(t, 4, w.Summary["totalPopMessages"])
	require.EqualValues(t, 3, w.Summary["totalPushRequests"])
	two.Call(t, http.StatusOK, "GET", "/api/v1/analytics/worker-metrics?"+lastHour(), nil).JSON(t, &w)
	require.EqualValues(t, 9, w.Summary["totalPushMessages"], "every replica's")
}

func TestParkedLongPollsAreAveragedPerQueueAndReplica(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Do(t, "GET", "/api/v1/pop/queue/idle?wait=true&timeout=2500", "", nil)
	}()
	<-done
	var got struct {
		BucketMinutes int `json:"bucketMinutes"`
		Series        []struct {
			QueueName   string  `json:"queueName"`
			Hostname    string  `json:"hostname"`
			WorkerID    int     `json:"workerId"`
			ParkedCount float64 `json:"parkedCount"`
		} `json:"series"`
		Replicas []map[string]any `json:"replicas"`
	}
	brokertest.Eventually(t, 5*time.Second, func() error {
		b.Call(t, http.StatusOK, "GET", "/api/v1/analytics/queue-parked-replicas?"+lastHour(), nil).JSON(t, &got)
		if len(got.Series) == 0 {
			return errors.New("no parked series yet")
		}
		return nil
	})
	require.NotEmpty(t, got.Series)
	var sum float64
	for _, s := range got.Series {
		require.Equal(t, "idle", s.QueueName)
		require.Equal(t, shared, s.Hostname)
		sum += s.ParkedCount
	}
	// One poll parked for 2.5 s: two or three one-second samples of a minute.
	require.InDelta(t, 2.5/60, sum, 0.03)
	require.Equal(t, []map[string]any{{"hostname": shared, "workerId": 0.0}}, got.Replicas)
	o := opsUntil(t, b, lastHour(), func(o queueOps) bool { return o.totals("idle").PopEmpty == 1 })
	require.EqualValues(t, 1, o.totals("idle").PopEmpty, "a wait that timed out is an empty pop")
}

func TestQueueLagIsABareArrayOfPerMinuteRowsNewestFirst(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.PushN(t, "lagged", "Default", 0, 2)
	b.Age(t, "lagged", 120*time.Millisecond)
	b.Pop(t, "/api/v1/pop/queue/lagged?batch=2&autoAck=true")
	var rows []map[string]any
	brokertest.Eventually(t, 5*time.Second, func() error {
		b.Call(t, http.StatusOK, "GET", "/api/v1/analytics/queue-lag?queue=lagged&"+lastHour(), nil).JSON(t, &rows)
		if len(rows) == 0 {
			return errors.New("no lag rows yet")
		}
		return nil
	})
	require.Len(t, rows, 1)
	r := rows[0]
	require.Equal(t, "lagged", r["queueName"])
	require.EqualValues(t, 2, r["popCount"])
	require.GreaterOrEqual(t, r["avgLagMs"], 100.0)
	require.GreaterOrEqual(t, r["maxLagMs"], r["avgLagMs"])
	require.Regexp(t, `:00Z$`, r["bucketTime"])
	require.JSONEq(t, `[]`, string(b.Call(t, http.StatusOK, "GET", "/api/v1/analytics/queue-lag?queue=other&"+lastHour(), nil).Body))
}

func TestBucketWidthFollowsTheLengthOfTheRange(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	to := time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)
	for span, want := range map[time.Duration]float64{
		time.Hour: 1, 6 * time.Hour: 5, 24 * time.Hour: 15, 7 * 24 * time.Hour: 60, 8 * 24 * time.Hour: 360,
	} {
		q := "from=" + to.Add(-span).Format(time.RFC3339) + "&to=" + to.Format(time.RFC3339)
		for _, route := range []string{"queue-ops", "queue-parked-replicas", "retention", "worker-metrics", "system-metrics"} {
			got := b.Call(t, http.StatusOK, "GET", "/api/v1/analytics/"+route+"?"+q, nil).Map(t)
			require.Equal(t, want, got["bucketMinutes"], "%s over %s", route, span)
		}
	}
}

func TestEveryAnalyticsRouteRefusesABadTimeWithA400(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	routes := []string{"/api/v1/status/analytics", "/api/v1/analytics/queue-lag", "/api/v1/analytics/queue-ops",
		"/api/v1/analytics/queue-parked-replicas", "/api/v1/analytics/retention", "/api/v1/analytics/system-metrics",
		"/api/v1/analytics/worker-metrics"}
	for _, route := range routes {
		for _, q := range []string{"queue=%E2", "queue=a%00", "from=yesterday", "to=2026-13-01T00:00:00Z", "from=2026-05-06T12:00:00Z&to=2026-05-06T11:00:00Z"} {
			r := b.Call(t, http.StatusBadRequest, "GET", route+"?"+q, nil)
			require.NotEmpty(t, r.Map(t)["error"], "%s?%s", route, q)
		}
		// Integers never are: workerId is not one Regent reads.
		b.Call(t, http.StatusOK, "GET", route+"?workerId=x&limit=y", nil)
	}
	r := b.Call(t, http.StatusBadRequest, "GET", "/api/v1/status/analytics?interval=minute&from=2020-01-01T00:00:00Z&to=2026-01-01T00:00:00Z", nil)
	require.Contains(t, r.Map(t)["error"], "span more than")
	b.Call(t, http.StatusBadRequest, "GET", "/api/v1/analytics/worker-metrics?hostname=%E2", nil)
	b.Call(t, http.StatusBadRequest, "GET", "/api/v1/status/analytics?namespace=a%00", nil)
	b.Call(t, http.StatusNotFound, "GET", "/api/v1/analytics", nil)
}

func TestStatusAnalyticsCountsStoredMessagesPerBucketAscendingAndZeroFilled(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.PushN(t, "stored", "Default", 0, 3)
	b.PushN(t, "stored", "Default", 3, 2)
	b.PushN(t, "elsewhere", "Default", 0, 4)
	now := time.Now().UTC()
	q := "interval=minute&from=" + url.QueryEscape(now.Add(-5*time.Minute).Format(time.RFC3339)) +
		"&to=" + url.QueryEscape(now.Add(time.Minute).Format(time.RFC3339))
	var got struct {
		DataPoints []struct {
			Timestamp string `json:"timestamp"`
			Messages  int64  `json:"messages"`
		} `json:"dataPoints"`
		Interval string `json:"interval"`
	}
	b.Call(t, http.StatusOK, "GET", "/api/v1/status/analytics?queue=stored&"+q, nil).JSON(t, &got)
	require.Equal(t, "minute", got.Interval)
	require.Len(t, got.DataPoints, 7, "every minute of the range, the empty ones too")
	var sum int64
	for i, p := range got.DataPoints {
		sum += p.Messages
		if i > 0 {
			require.Less(t, got.DataPoints[i-1].Timestamp, p.Timestamp, "ascending")
		}
	}
	require.EqualValues(t, 5, sum)

	b.Call(t, http.StatusOK, "GET", "/api/v1/status/analytics?interval=week", nil).JSON(t, &got)
	require.Equal(t, "hour", got.Interval, "an interval Regent does not know is hour")
	require.Len(t, got.DataPoints, 25, "the last 24 hours by default, both ends included")
	sum = 0
	for _, p := range got.DataPoints {
		sum += p.Messages
	}
	require.EqualValues(t, 9, sum)
}

func TestRetentionSeriesSumsEachKindOfEventPerBucket(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	at := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Minute)
	for _, e := range []struct {
		tenant, queue, kind string
		n                   int64
	}{{b.Tenant, "q", "retention", 5}, {b.Tenant, "q", "completed_retention", 2}, {b.Tenant, "r", "eviction", 1}, {b.Tenant + "-else", "q", "retention", 100}} {
		require.NoError(t, b.DB.PutRetentionEvent(t.Context(), dbtest.RetentionEvent{Tenant: e.tenant, Queue: e.queue, Kind: e.kind, At: at, Messages: e.n}))
	}
	var got struct {
		Series []map[string]any `json:"series"`
		Totals map[string]any   `json:"totals"`
	}
	b.Call(t, http.StatusOK, "GET", "/api/v1/analytics/retention?"+lastHour(), nil).JSON(t, &got)
	require.Len(t, got.Series, 1)
	require.Equal(t, at.Format("2006-01-02T15:04:05Z"), got.Series[0]["bucket"])
	want := map[string]any{"retentionMsgs": 5.0, "completedRetentionMsgs": 2.0, "evictionMsgs": 1.0, "totalMsgs": 8.0, "eventCount": 3.0}
	require.Equal(t, want, got.Totals)
	b.Call(t, http.StatusOK, "GET", "/api/v1/analytics/retention?queue=r&"+lastHour(), nil).JSON(t, &got)
	require.Equal(t, 1.0, got.Totals["evictionMsgs"])
	require.Equal(t, 1.0, got.Totals["totalMsgs"])
}

func TestSystemMetricsReportsEachReplicasSamplesInQueensShape(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	var got struct {
		Replicas []struct {
			Hostname   string `json:"hostname"`
			TimeSeries []struct {
				Timestamp   string                                   `json:"timestamp"`
				SampleCount int                                      `json:"sampleCount"`
				Metrics     map[string]map[string]map[string]float64 `json:"metrics"`
			} `json:"timeSeries"`
		} `json:"replicas"`
		ReplicaCount int `json:"replicaCount"`
	}
	brokertest.Eventually(t, 5*time.Second, func() error { // the first sample is taken as the broker starts
		b.Call(t, http.StatusOK, "GET", "/api/v1/analytics/system-metrics?"+lastHour(), nil).JSON(t, &got)
		if got.ReplicaCount == 0 {
			return errors.New("no replica sampled yet")
		}
		return nil
	})
	require.Equal(t, 1, got.ReplicaCount)
	r := got.Replicas[0]
	require.Equal(t, shared, r.Hostname)
	require.NotEmpty(t, r.TimeSeries)
	for _, s := range r.TimeSeries {
		// The sample taken at start and the minute's: never one per flush.
		require.LessOrEqual(t, s.SampleCount, 2, s.Timestamp)
	}
	m := r.TimeSeries[len(r.TimeSeries)-1].Metrics
	require.Greater(t, m["memory"]["rss_bytes"]["last"], float64(1<<20))
	require.GreaterOrEqual(t, m["memory"]["virtual_bytes"]["max"], m["memory"]["rss_bytes"]["max"])
	for _, leaf := range []string{"avg", "min", "max", "last"} {
		require.Contains(t, m["cpu"]["user_us"], leaf)
		require.Contains(t, m["database"]["pool_active"], leaf)
	}
	require.NotContains(t, m, "threadpool")
	b.Call(t, http.StatusOK, "GET", "/api/v1/analytics/system-metrics?hostname=nobody&"+lastHour(), nil).JSON(t, &got)
	require.Zero(t, got.ReplicaCount)
	require.NotNil(t, got.Replicas, "an empty list, not null")
}

func TestPostgresStatsCoversTheBrokerSchemasOnly(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.PushN(t, "q", "Default", 0, 1)
	got := b.Call(t, http.StatusOK, "GET", "/api/v1/analytics/postgres-stats", nil).Map(t)
	for _, k := range []string{"timestamp", "database", "databaseCache", "tableCache", "indexCache", "cacheSummary",
		"deadTuples", "hotUpdates", "autovacuumStatus", "activeQueries", "bufferConfig", "bufferUsage", "tableSizes"} {
		require.Contains(t, got, k)
	}
	require.Equal(t, []any{}, got["bufferUsage"])
	require.Contains(t, got["bufferConfig"], "sharedBuffersSize")
	sizes := got["tableSizes"].([]any)
	require.NotEmpty(t, sizes)
	var tables []string
	for _, s := range sizes {
		table := s.(map[string]any)["table"].(string)
		require.True(t, strings.HasPrefix(table, "queen.") || strings.HasPrefix(table, "queen_streams."), table)
		tables = append(tables, table)
	}
	require.Contains(t, tables, "queen.log_segments")
	require.Contains(t, got["cacheSummary"], "tables")
}
