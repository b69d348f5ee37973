package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func env(t *testing.T, b *brokertest.Broker, queue string) *Env {
	e := &Env{URL: b.URL, Token: b.Token, Queue: queue, C: 3, B: 10, P: 4, N: 205, Size: 32}
	require.NoError(t, e.init())
	return e
}

// requireVerified requires a run without errors whose verification passed.
func requireVerified(t *testing.T, res *Result) {
	t.Helper()
	require.Empty(t, res.Error)
	require.Zero(t, res.Errors)
	require.NotNil(t, res.Verified)
	require.True(t, *res.Verified, res.Verification)
}

func TestPushScenarioStoresNMessagesOverPPartitions(t *testing.T) {
	b := brokertest.Start(t)
	res := env(t, b, "push-q").run(t.Context(), "push", scenarios["push"])
	require.Empty(t, res.Error)
	require.Zero(t, res.Errors)
	require.Equal(t, 21, res.Requests)
	require.Greater(t, res.MsgsPerSec, 0.0)
	var frames, parts int
	require.NoError(t, b.Pool.QueryRow(t.Context(), `SELECT sum(frame_count), count(DISTINCT partition_id) FROM queen.log_segments`).Scan(&frames, &parts))
	require.Equal(t, 205, frames)
	require.Equal(t, 4, parts)
}

func TestPopAckScenarioVerifiesExactlyNDistinct(t *testing.T) {
	b := brokertest.Start(t)
	res := env(t, b, "popack-q").run(t.Context(), "popack", scenarios["popack"])
	requireVerified(t, res)
	var left int
	require.NoError(t, b.Pool.QueryRow(t.Context(), `SELECT count(*) FROM queen.cursors c JOIN queen.partitions p ON p.id = c.partition_id
		WHERE c.committed < p.next_offset`).Scan(&left))
	require.Zero(t, left, "everything was acknowledged")
}

func TestPopAckScenarioReportsMissingMessages(t *testing.T) {
	b := brokertest.Start(t)
	e := env(t, b, "short-q")
	require.NoError(t, e.fill(t.Context(), false))
	e.N, e.Prefilled = 300, true // more than the queue holds
	res := e.run(t.Context(), "popack", scenarios["popack"])
	require.False(t, *res.Verified)
	require.Contains(t, res.Verification, "205 distinct of 300")
}

func TestCycleScenarioVerifiesExactlyOnce(t *testing.T) {
	b := brokertest.Start(t)
	// With tenancy on (secure mode) the tenant needs a grant to register.
	_, err := b.Pool.Exec(t.Context(), `INSERT INTO queen_streams.quota (tenant) VALUES ($1)`, b.Tenant)
	require.NoError(t, err)
	res := env(t, b, "cycle-q").run(t.Context(), "cycle", scenarios["cycle"])
	requireVerified(t, res)
	require.Greater(t, res.CyclesPerSec, 0.0)
	var state int
	require.NoError(t, b.Pool.QueryRow(t.Context(), `SELECT count(*) FROM queen_streams.state`).Scan(&state))
	require.Equal(t, 4*4, state, "S state rows per source partition")
}

func TestSummaryGivesTheMedianOfEachFigure(t *testing.T) {
	runs := []*Result{
		{Scenario: "cycle", MsgsPerSec: 300, CyclesPerSec: 3, P50Ms: 2.5, P99Ms: 9},
		{Scenario: "cycle", MsgsPerSec: 100, CyclesPerSec: 1, P50Ms: 2.1, P99Ms: 7},
		{Scenario: "cycle", MsgsPerSec: 200, CyclesPerSec: 2, P50Ms: 3.0, P99Ms: 8},
	}
	require.Equal(t, "# cycle, median of 3 runs: 200 msgs/s, 2 cycles/s, p50 2.500 ms, p99 8.000 ms", summary(runs))
	require.Equal(t, "# push, median of 1 runs: 5 msgs/s, p50 1.000 ms, p99 2.000 ms",
		summary([]*Result{{Scenario: "push", MsgsPerSec: 5, P50Ms: 1, P99Ms: 2}}))
}
