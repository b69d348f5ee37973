package admin_test

import (
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/brokertest"
)

type statusRow struct {
	Timestamp          string   `json:"timestamp"`
	Ingested           int64    `json:"ingested"`
	Processed          int64    `json:"processed"`
	PopMessages        int64    `json:"popMessages"`
	IngestedPerSecond  float64  `json:"ingestedPerSecond"`
	ProcessedPerSecond float64  `json:"processedPerSecond"`
	PopPerSecond       float64  `json:"popPerSecond"`
	AvgLagMs           int64    `json:"avgLagMs"`
	MaxLagMs           int64    `json:"maxLagMs"`
	AckFailed          int64    `json:"ackFailed"`
	DLQCount           int64    `json:"dlqCount"`
	DBErrors           *int64   `json:"dbErrors"`
	AvgEventLoopLagMs  *float64 `json:"avgEventLoopLagMs"`
	MinFreeSlots       *float64 `json:"minFreeSlots"`
	CPUUserPct         *float64 `json:"queenCpuUserPct"`
	RSSMb              *float64 `json:"queenRssMb"`
	DBPoolSize         *float64 `json:"dbPoolSize"`
}

type status struct {
	BucketMinutes int         `json:"bucketMinutes"`
	PointCount    int         `json:"pointCount"`
	Throughput    []statusRow `json:"throughput"`
	Messages      struct {
		Total           int64              `json:"total"`
		Completed       int64              `json:"completed"`
		Failed          int64              `json:"failed"`
		DeadLetter      int64              `json:"deadLetter"`
		Requests        map[string]int64   `json:"requests"`
		BatchEfficiency map[string]float64 `json:"batchEfficiency"`
	} `json:"messages"`
	Errors  map[string]int64 `json:"errors"`
	Workers []map[string]any `json:"workers"`
}

// sum adds up the series' counts.
func (s status) sum() statusRow {
	var t statusRow
	for _, r := range s.Throughput {
		t.Ingested += r.Ingested
		t.Processed += r.Processed
		t.PopMessages += r.PopMessages
		t.AckFailed += r.AckFailed
		t.DLQCount += r.DLQCount
		t.MaxLagMs = max(t.MaxLagMs, r.MaxLagMs)
	}
	return t
}

// statusUntil reads GET /api/v1/status?query as token until done holds for
// it (5 s at most).
func statusUntil(t *testing.T, b *brokertest.Broker, token, query string, done func(status) bool) status {
	t.Helper()
	var s status
	brokertest.Eventually(t, 5*time.Second, func() error {
		r := b.Do(t, "GET", "/api/v1/status?"+query, token, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		s = status{}
		r.JSON(t, &s)
		if !done(s) {
			return fmt.Errorf("status never got there: %+v", s)
		}
		return nil
	})
	return s
}

// traffic pushes 4 messages to q in one request, pops 2 under a lease and
// acks them in one request, one with a wrong lease (refused), then pops
// the other 2 with autoAck.
func traffic(t *testing.T, b *brokertest.Broker) {
	t.Helper()
	b.PushN(t, "q", "p", 0, 4)
	p := b.Pop(t, "/api/v1/pop/queue/q?batch=2")
	require.Len(t, p.Messages, 2)
	b.Call(t, http.StatusOK, "POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": []any{
		map[string]any{"transactionId": p.Messages[0].TransactionID, "partitionId": p.PartitionID, "leaseId": p.LeaseID},
		map[string]any{"transactionId": p.Messages[1].TransactionID, "partitionId": p.PartitionID,
			"leaseId": "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f"},
	}})
	ns := b.Pop(t, "/api/v1/pop/queue/q?batch=2&autoAck=true&consumerGroup=g2&subscriptionMode=all").Ns()
	require.Len(t, ns, 2)
}

func TestStatusThroughputCountsPushesAcksOfEitherOutcomeAutoAckPopsAndLagPerBucket(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	traffic(t, b)
	s := statusUntil(t, b, "", lastHour(), func(s status) bool { return s.sum().Processed == 4 })
	require.Equal(t, 1, s.BucketMinutes)
	require.Len(t, s.Throughput, s.PointCount)
	require.GreaterOrEqual(t, s.PointCount, 60)
	for i := 1; i < len(s.Throughput); i++ {
		require.Greater(t, s.Throughput[i-1].Timestamp, s.Throughput[i].Timestamp, "newest first")
	}
	got := s.sum()
	require.EqualValues(t, 4, got.Ingested)
	require.EqualValues(t, 4, got.Processed, "the accepted ack, the refused one and the 2 autoAck deliveries")
	require.EqualValues(t, 4, got.PopMessages, "2 leased, and 2 again to the autoAck group")
	require.EqualValues(t, 1, got.AckFailed)
	require.EqualValues(t, 1, s.Errors["ackFailed"])
	for _, r := range s.Throughput {
		require.Equal(t, round2(float64(r.Ingested)/60), r.IngestedPerSecond, r.Timestamp)
		require.Equal(t, round2(float64(r.Processed)/60), r.ProcessedPerSecond, r.Timestamp)
		require.Equal(t, round2(float64(r.PopMessages)/60), r.PopPerSecond, r.Timestamp)
		require.LessOrEqual(t, r.AvgLagMs, r.MaxLagMs, r.Timestamp)
		require.NotNil(t, r.DBErrors, "0, not null: Regent does not count them")
		require.Nil(t, r.AvgEventLoopLagMs, "Regent has no event loop")
	}
}

func TestStatusHealthFieldsComeFromTheReplicaSamplesAndAreNullWithout(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	s := statusUntil(t, b, "", lastHour(), func(s status) bool { return sampled(s) > 0 })
	for _, r := range s.Throughput {
		if r.RSSMb == nil {
			require.Nil(t, r.CPUUserPct, r.Timestamp)
			require.Nil(t, r.DBPoolSize, r.Timestamp)
			require.Nil(t, r.MinFreeSlots, r.Timestamp)
			continue
		}
		require.Greater(t, *r.RSSMb, 1.0, "a Go process holds more than a MB")
		require.NotNil(t, r.CPUUserPct)
		require.NotNil(t, r.MinFreeSlots)
		require.GreaterOrEqual(t, *r.DBPoolSize, 1.0)
	}
}

// sampled counts the buckets with process health.
func sampled(s status) int {
	n := 0
	for _, r := range s.Throughput {
		if r.RSSMb != nil {
			n++
		}
	}
	return n
}

func TestStatusQueueNamespaceAndTaskFilterTheCountsButNotTheHealth(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": "q", "namespace": "n", "task": "t"})
	b.PushN(t, "q", "p", 0, 3)
	b.PushN(t, "other", "p", 0, 5)
	all := statusUntil(t, b, "", lastHour(), func(s status) bool { return s.sum().Ingested == 8 && sampled(s) > 0 })
	for query, want := range map[string]int64{"queue=q": 3, "namespace=n": 3, "task=t": 3, "queue=other": 5,
		"namespace=n&queue=other": 0, "task=none": 0, "queue=none": 0} {
		s := statusUntil(t, b, "", query+"&"+lastHour(), func(status) bool { return true })
		require.EqualValues(t, want, s.sum().Ingested, query)
		require.Positive(t, sampled(s), "%s: health stays system-wide", query)
		require.Equal(t, all.Messages.Requests, s.Messages.Requests, "%s: the lifetime counters are the tenant's", query)
	}
}

func TestStatusRequestsAndBatchEfficiencyAreLifetimeCountersOfTheMinutesKept(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	traffic(t, b)
	// A window of long ago: no buckets with counts, the same lifetime.
	s := statusUntil(t, b, "", "from=2000-01-01T00:00:00Z&to=2000-01-01T01:00:00Z", func(s status) bool {
		return s.Messages.Requests["ack"] == 2
	})
	require.Zero(t, s.sum().Ingested)
	require.Equal(t, map[string]int64{"push": 1, "pop": 2, "ack": 2}, s.Messages.Requests,
		"the ack request and the autoAck pop, which is its own ack")
	require.Equal(t, map[string]float64{"push": 4, "pop": 2, "ack": 2}, s.Messages.BatchEfficiency)
	require.EqualValues(t, 4, s.Messages.Total)
	require.EqualValues(t, 3, s.Messages.Completed)
	require.EqualValues(t, 1, s.Messages.Failed)
	require.EqualValues(t, 0, s.Messages.DeadLetter)
}

// statusWorkersAreTheReplicasSampled is run by TestTwoReplicasOnOneDatabase.
func statusWorkersAreTheReplicasSampled(t *testing.T, one, two *brokertest.Broker) {
	s := statusUntil(t, one, "", lastHour(), func(s status) bool { return len(s.Workers) == 2 })
	hosts := []any{s.Workers[0]["hostname"], s.Workers[1]["hostname"]}
	require.ElementsMatch(t, []any{"replica-1", "replica-2"}, hosts)
	for _, w := range s.Workers {
		require.EqualValues(t, 0, w["workerId"])
		require.GreaterOrEqual(t, w["dbConnections"], 1.0, "the sample's pool")
		require.NotNil(t, w["freeSlots"])
	}
	// A replica whose sample is older than 2 minutes is gone.
	two.Stop()
	require.NoError(t, one.DB.AgeReplica(t.Context(), "replica-2", 10*time.Minute))
	s = statusUntil(t, one, "", lastHour(), func(status) bool { return true })
	require.Len(t, s.Workers, 1)
	require.Equal(t, "replica-1", s.Workers[0]["hostname"])
}

// statusWorkersHoldTheAnsweringReplica is run by
// TestTwoReplicasOnOneDatabase, after b sampled itself.
func statusWorkersHoldTheAnsweringReplica(t *testing.T, b *brokertest.Broker) {
	// The broker samples itself at start; without that sample it is still listed.
	require.NoError(t, b.DB.ForgetReplicas(t.Context()))
	s := statusUntil(t, b, "", lastHour(), func(status) bool { return true })
	require.Len(t, s.Workers, 1)
	require.Equal(t, "replica-1", s.Workers[0]["hostname"])
	require.GreaterOrEqual(t, s.Workers[0]["dbConnections"], 1.0, "the live pool")
}

func TestOverviewThroughputIsTheLastFiveMinutesPerSecondAndLagTimeIsInSeconds(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.PushN(t, "q", "p", 0, 90)
	b.Age(t, "q", 1100*time.Millisecond) // a pop lag of over a second
	ns := b.Pop(t, "/api/v1/pop/queue/q?batch=90&autoAck=true").Ns()
	require.Len(t, ns, 90)
	var m map[string]any
	brokertest.Eventually(t, 5*time.Second, func() error {
		m = b.Call(t, http.StatusOK, "GET", "/api/v1/resources/overview", nil).Map(t)
		if m["throughput"].(map[string]any)["processedPerSecond"] == 0.0 {
			return fmt.Errorf("the overview counts no pop yet: %v", m["throughput"])
		}
		return nil
	})
	require.Equal(t, map[string]any{"ingestedPerSecond": 0.3, "processedPerSecond": 0.3}, m["throughput"], "90 ÷ 300")
	lag := m["lag"].(map[string]any)["time"].(map[string]any)
	require.GreaterOrEqual(t, lag["max"], 1.1)
	require.Less(t, lag["max"], 60.0, "seconds, not ms")
	require.GreaterOrEqual(t, lag["avg"], 1.1)
	require.LessOrEqual(t, lag["avg"], lag["max"])
	// Counts older than five minutes are not recent.
	b.Age(t, "q", 10*time.Minute)
	m = b.Call(t, http.StatusOK, "GET", "/api/v1/resources/overview", nil).Map(t)
	require.Equal(t, map[string]any{"ingestedPerSecond": 0.0, "processedPerSecond": 0.0}, m["throughput"])
	require.Equal(t, map[string]any{"avg": 0.0, "median": 0.0, "min": 0.0, "max": 0.0}, m["lag"].(map[string]any)["time"])
	require.EqualValues(t, 90, m["messages"].(map[string]any)["completed"], "lifetime")
}

func TestAnAutoAckPopCountsAsOneAckRequestWhoseItemsAllSucceeded(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.PushN(t, "q", "p", 0, 3)
	b.Pop(t, "/api/v1/pop/queue/q?batch=3&autoAck=true")
	got := opsUntil(t, b, lastHour(), func(o queueOps) bool { return o.totals("q").AckSuccess > 0 }).totals("q")
	require.Equal(t, [3]int64{1, 3, 0}, [3]int64{got.AckRequests, got.AckSuccess, got.AckFailed})
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
