package dbtest_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
)

// around is the hour around at, as an analytics route's window.
func around(at time.Time) string {
	return "from=" + url.QueryEscape(at.Add(-30*time.Minute).Format(time.RFC3339)) +
		"&to=" + url.QueryEscape(at.Add(30*time.Minute).Format(time.RFC3339))
}

// series reads the series of an analytics route.
func series(t *testing.T, b *brokertest.Broker, path string) []map[string]any {
	t.Helper()
	var o struct {
		Series []map[string]any `json:"series"`
	}
	b.Call(t, http.StatusOK, "GET", path, nil).JSON(t, &o)
	return o.Series
}

func TestPutQueueMinuteIsCountedAndForgetQueueMinuteTakesOnlyItsQueues(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q, other := b.Q("q"), b.Q("other")
	at := time.Now().Add(-time.Hour).Truncate(time.Minute)
	for _, queue := range []string{q, other} {
		require.NoError(t, b.DB.PutQueueMinutes(t.Context(), dbtest.QueueMinute{Tenant: b.Tenant, Queue: queue, Replica: "r", Minute: at.Add(20 * time.Second),
			PushMessages: 7, LagMaxMs: 3}))
	}
	pushed := func(queue string) float64 {
		sum := 0.0
		for _, s := range series(t, b, "/api/v1/analytics/queue-ops?queue="+queue+"&"+around(at)) {
			sum += s["pushMessages"].(float64)
		}
		return sum
	}
	require.Equal(t, 7.0, pushed(q))
	require.NoError(t, b.DB.ForgetQueueMinute(t.Context(), b.Tenant, q, at))
	require.Zero(t, pushed(q))
	require.Equal(t, 7.0, pushed(other), "another queue's minute is left alone")
	require.Error(t, b.DB.ForgetQueueMinute(t.Context(), b.Tenant, q, at), "nothing is left to forget")
}

func TestPutGroupMinuteIsALagSampleOfTheGroup(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	at := time.Now().Add(-time.Hour).Truncate(time.Minute)
	require.NoError(t, b.DB.PutGroupMinute(t.Context(), dbtest.GroupMinute{Tenant: b.Tenant, Queue: q, Group: "g", Minute: at, Lag: 12, LagSeconds: 3.5}))
	got := series(t, b, "/api/v1/analytics/group-lag?queue="+q+"&"+around(at))
	require.Len(t, got, 1)
	require.Equal(t, "g", got[0]["consumerGroup"])
	require.Equal(t, 12.0, got[0]["lag"])
	require.Equal(t, 3.5, got[0]["lagSeconds"])
}

func TestPutRetentionEventIsCountedByKind(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	at := time.Now().Add(-time.Hour).Truncate(time.Minute)
	require.NoError(t, b.DB.PutRetentionEvent(t.Context(), dbtest.RetentionEvent{Tenant: b.Tenant, Queue: q, Kind: "eviction", At: at, Messages: 4}))
	require.Error(t, b.DB.PutRetentionEvent(t.Context(), dbtest.RetentionEvent{Tenant: b.Tenant, Queue: q, Kind: "nonsense", At: at, Messages: 1}))
	var got struct {
		Totals map[string]any `json:"totals"`
	}
	b.Call(t, http.StatusOK, "GET", "/api/v1/analytics/retention?queue="+q+"&"+around(at), nil).JSON(t, &got)
	require.Equal(t, 4.0, got.Totals["evictionMsgs"])
	require.Equal(t, 4.0, got.Totals["totalMsgs"])
}

func TestTracesCountsTheTracesOfTheTenantsQueues(t *testing.T) {
	t.Parallel()
	b := tenants.Shared(t) // a tenant of its own
	q := b.Q("q")
	none, err := b.DB.Traces(t.Context(), b.Tenant)
	require.NoError(t, err)
	require.Equal(t, dbtest.Traces{}, none)
	r := b.Call(t, http.StatusCreated, "POST", "/api/v1/push", map[string]any{"items": []any{
		map[string]any{"queue": q, "transactionId": "m0", "payload": 1}, map[string]any{"queue": q, "transactionId": "m1", "payload": 2}}})
	var pushed []map[string]any
	r.JSON(t, &pushed)
	for _, tx := range []string{"m0", "m0", "m1"} {
		b.Call(t, http.StatusCreated, "POST", "/api/v1/traces", map[string]any{"transactionId": tx, "partitionId": pushed[0]["partition_id"],
			"data": 1, "traceNames": []string{"a", "b"}})
	}
	got, err := b.DB.Traces(t.Context(), b.Tenant)
	require.NoError(t, err)
	require.Equal(t, dbtest.Traces{Traces: 3, Names: 6, Messages: 2}, got)
	other, err := b.DB.Traces(t.Context(), "someone-else")
	require.NoError(t, err)
	require.Equal(t, dbtest.Traces{}, other)
}

func TestQueueMinutesAndQueryMinutesReadWhatWasPut(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	at := time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)
	put := dbtest.QueueMinute{Tenant: b.Tenant, Queue: b.Q("q"), Replica: "r", Minute: at.Add(30 * time.Second), PushRequests: 1, PushMessages: 2,
		PopRequests: 3, PopMessages: 4, LagSumMs: 5, LagCount: 6, LagMaxMs: 7}
	require.NoError(t, b.DB.PutQueueMinutes(t.Context(), put))
	minutes, err := b.DB.QueueMinutes(t.Context())
	require.NoError(t, err)
	i := slices.IndexFunc(minutes, func(m dbtest.QueueMinute) bool { return m.Queue == put.Queue })
	require.GreaterOrEqual(t, i, 0)
	got := minutes[i]
	require.Equal(t, at, got.Minute.UTC(), "truncated to its minute")
	got.Minute, put.Minute = at, at
	require.Equal(t, put, got)

	id := uuid.NewString()
	require.NoError(t, b.DB.PutQueryMinute(t.Context(), dbtest.QueryMinute{Tenant: b.Tenant, QueryID: id, Replica: "r", Minute: at, Cycles: 2, Refused: 1}))
	queries, err := b.DB.QueryMinutes(t.Context())
	require.NoError(t, err)
	i = slices.IndexFunc(queries, func(m dbtest.QueryMinute) bool { return m.QueryID == id })
	require.GreaterOrEqual(t, i, 0)
	require.Equal(t, [2]int64{2, 1}, [2]int64{queries[i].Cycles, queries[i].Refused})
}

func TestSamplesListAReplicasSamplesOfItself(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	var samples []dbtest.Sample
	brokertest.Eventually(t, 10*time.Second, func() error { // the broker samples itself as it starts
		var err error
		if samples, err = b.DB.Samples(t.Context(), b.Config.Replica); err != nil || len(samples) == 0 {
			return fmt.Errorf("no sample of %q yet (%v)", b.Config.Replica, err)
		}
		return nil
	})
	require.Greater(t, samples[0].RSSBytes, int64(1<<20))
	require.GreaterOrEqual(t, samples[0].PoolSize, 1)
	none, err := b.DB.Samples(t.Context(), "nobody")
	require.NoError(t, err)
	require.Empty(t, none)
}

func TestPartitionsDeletePartitionAndDeleteQueue(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q, other := b.Q("q"), b.Q("other")
	b.PushN(t, q, "a", 0, 2)
	b.PushN(t, q, "b", 0, 1)
	b.PushN(t, other, "a", 0, 1)
	parts, err := b.DB.Partitions(t.Context(), b.Tenant, q)
	require.NoError(t, err)
	require.Len(t, parts, 2)
	require.Equal(t, []string{"a", "b"}, []string{parts[0].Name, parts[1].Name})
	require.EqualValues(t, 2, parts[0].NextOffset)
	require.NotNil(t, parts[0].LastPushAt)
	require.Equal(t, b.Stored(t, q).Partitions["a"], parts[0].ID)

	require.NoError(t, b.DB.DeletePartition(t.Context(), b.Tenant, q, "a"))
	require.Error(t, b.DB.DeletePartition(t.Context(), b.Tenant, q, "a"), "gone already")
	parts, err = b.DB.Partitions(t.Context(), b.Tenant, q)
	require.NoError(t, err)
	require.Len(t, parts, 1)
	require.NoError(t, b.DB.DeleteQueue(t.Context(), b.Tenant, q))
	require.Error(t, b.DB.DeleteQueue(t.Context(), b.Tenant, q))
	require.False(t, b.Stored(t, q).Exists)
	require.True(t, b.Stored(t, other).Exists, "another queue is left alone")
}
