package admin_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
)

type lagHistory struct {
	BucketMinutes int      `json:"bucketMinutes"`
	Queue         string   `json:"queue"`
	Groups        []string `json:"groups"`
	Series        []struct {
		Bucket        string  `json:"bucket"`
		ConsumerGroup string  `json:"consumerGroup"`
		Lag           int64   `json:"lag"`
		LagSeconds    float64 `json:"lagSeconds"`
	} `json:"series"`
}

// span is the window [from, to) as a query.
func span(from, to time.Time) string {
	return "from=" + url.QueryEscape(from.Format(time.RFC3339)) + "&to=" + url.QueryEscape(to.Format(time.RFC3339))
}

func TestGroupLagHistoryIsEachGroupsLargestSampleOfABucket(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	t0 := time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)
	for _, s := range []struct {
		queue, group string
		minute       int
		lag          int64
		age          float64
	}{
		{"orders", "billing", 0, 10, 5}, {"orders", "billing", 3, 40, 65.5}, {"orders", "billing", 7, 2, 1},
		{"orders", "audit", 1, 7, 12}, {"other", "billing", 0, 999, 999},
	} {
		require.NoError(t, b.DB.PutGroupMinute(t.Context(), dbtest.GroupMinute{Tenant: b.Tenant, Queue: s.queue, Group: s.group,
			Minute: t0.Add(time.Duration(s.minute) * time.Minute), Lag: s.lag, LagSeconds: s.age}))
	}
	var h lagHistory
	// Six hours: buckets of 5 minutes.
	b.Call(t, http.StatusOK, "GET", "/api/v1/analytics/group-lag?queue=orders&"+span(t0.Add(-5*time.Hour), t0.Add(time.Hour)), nil).JSON(t, &h)
	require.Equal(t, 5, h.BucketMinutes)
	require.Equal(t, []string{"audit", "billing"}, h.Groups)
	type row struct {
		bucket, group string
		lag           int64
		age           float64
	}
	var got []row
	for _, s := range h.Series {
		got = append(got, row{s.Bucket, s.ConsumerGroup, s.Lag, s.LagSeconds})
	}
	require.Equal(t, []row{
		{"2026-05-06T12:00:00Z", "audit", 7, 12}, {"2026-05-06T12:00:00Z", "billing", 40, 65.5},
		{"2026-05-06T12:05:00Z", "billing", 2, 1},
	}, got)
}

type cycleHistory struct {
	BucketMinutes int    `json:"bucketMinutes"`
	QueryID       string `json:"queryId"`
	Series        []struct {
		Bucket  string `json:"bucket"`
		Cycles  int64  `json:"cycles"`
		Refused int64  `json:"refused"`
	} `json:"series"`
}

func TestQueryCyclesHistoryCountsCommittedAndRefusedCycles(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.Grant(t, b.Tenant, nil) // a tenant registers queries under a grant
	var reg struct {
		QueryID string `json:"query_id"`
	}
	b.Call(t, http.StatusOK, "POST", "/streams/v1/queries", map[string]any{"name": "counted", "source_queue": "clicks", "config_hash": "h"}).JSON(t, &reg)
	b.PushN(t, "clicks", "Default", 0, 2)
	p := b.Pop(t, "/api/v1/pop/queue/clicks?batch=1&consumerGroup=streams.counted")
	cycle := func(lease string) map[string]any {
		return map[string]any{"query_id": reg.QueryID, "partition_id": p.PartitionID, "consumer_group": "streams.counted",
			"state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": 1}},
			"ack":       map[string]any{"leaseId": lease, "status": "completed", "count": 1}}
	}
	var res struct {
		Success bool `json:"success"`
	}
	b.Call(t, http.StatusOK, "POST", "/streams/v1/cycle", cycle(p.LeaseID)).JSON(t, &res)
	require.True(t, res.Success)
	b.Call(t, http.StatusOK, "POST", "/streams/v1/cycle", cycle(uuid.NewString())).JSON(t, &res)
	require.False(t, res.Success, "a cycle with a lease the partition does not hold is refused")

	path := "/api/v1/analytics/query-cycles?queryId=" + reg.QueryID + "&" + lastHour()
	// The two cycles may fall on either side of a minute's end: one bucket
	// or two, their sums are what counts.
	var h cycleHistory
	var sums [2]int64
	brokertest.Eventually(t, 5*time.Second, func() error {
		h = cycleHistory{}
		b.Call(t, http.StatusOK, "GET", path, nil).JSON(t, &h)
		sums = [2]int64{}
		for _, m := range h.Series {
			sums[0] += m.Cycles
			sums[1] += m.Refused
		}
		if sums != [2]int64{1, 1} {
			return fmt.Errorf("cycles and refusals are %v", sums)
		}
		return nil
	})
	require.Equal(t, 1, h.BucketMinutes)
	require.Equal(t, reg.QueryID, h.QueryID)
	require.LessOrEqual(t, len(h.Series), 2, "the minutes of the two cycles")
	require.Equal(t, [2]int64{1, 1}, sums, "one committed cycle and one refused")
}

func TestHistoryRoutesAnswer400ForABadQueueQueryIdOrWindow(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	for _, path := range []string{
		"/api/v1/analytics/group-lag",
		"/api/v1/analytics/group-lag?queue=q&from=2026-05-06T12:00:00Z&to=2026-05-06T11:00:00Z",
		"/api/v1/analytics/group-lag?queue=q&from=yesterday",
		"/api/v1/analytics/query-cycles",
		"/api/v1/analytics/query-cycles?queryId=not-a-uuid",
		"/api/v1/analytics/query-cycles?queryId=" + uuid.NewString() + "&to=soon",
	} {
		r := b.Call(t, http.StatusBadRequest, "GET", path, nil)
		require.Contains(t, r.Map(t), "error", path)
	}
}
