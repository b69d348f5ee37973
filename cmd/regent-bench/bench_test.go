package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/brokertest"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

func env(t *testing.T, b *brokertest.Broker, queue string) *Env {
	e := &Env{URL: b.URL, Token: b.Token, Queue: queue, C: 3, B: 10, P: 4, N: 205, Size: 32, TxIDs: true}
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
	b := brokertest.Shared(t)
	q := b.Q("push-q")
	res := env(t, b, q).run(t.Context(), "push", scenarios["push"])
	require.Empty(t, res.Error)
	require.Zero(t, res.Errors)
	require.Equal(t, 21, res.Requests)
	require.Greater(t, res.MsgsPerSec, 0.0)
	stored := b.Stored(t, q)
	require.Equal(t, 205, stored.Frames)
	require.Len(t, stored.Partitions, 4)
}

// popAll pops every message of the queue with auto-ack.
func popAll(t *testing.T, e *Env) []popMessage {
	var all []popMessage
	path := "/api/v1/pop/queue/" + url.PathEscape(e.Queue) + "?batch=1000&autoAck=true&partitions=" + fmt.Sprint(e.P)
	for range 10 {
		status, body, err := e.Do(t.Context(), "GET", path, nil, false)
		require.NoError(t, err)
		if status == 204 {
			return all
		}
		var a popAnswer
		require.NoError(t, a.parse(body))
		for _, m := range a.Messages {
			all = append(all, popMessage{ID: append([]byte(nil), m.ID...), TransactionID: append([]byte(nil), m.TransactionID...)})
		}
	}
	t.Fatal("the queue did not drain in 10 pops")
	return nil
}

func TestPushScenarioGivesEveryItemAUUIDv7TransactionIDOfItsOwn(t *testing.T) {
	b := brokertest.Shared(t)
	e := env(t, b, b.Q("txid-q"))
	res := e.run(t.Context(), "push", scenarios["push"])
	requireVerified(t, res)
	require.True(t, *res.TransactionIDs)
	msgs := popAll(t, e)
	require.Len(t, msgs, e.N)
	seen := map[string]bool{}
	for _, m := range msgs {
		id, err := uuid.ParseBytes(m.TransactionID)
		require.NoError(t, err)
		require.Equal(t, uuid.Version(7), id.Version())
		require.NotEqual(t, string(m.ID), string(m.TransactionID), "the client's id, not the broker's")
		require.False(t, seen[id.String()], "transactionId %s twice", id)
		seen[id.String()] = true
	}
}

func TestPushScenarioWithoutTransactionIDsLetsTheBrokerUseTheMessageID(t *testing.T) {
	b := brokertest.Shared(t)
	e := env(t, b, b.Q("no-txid-q"))
	e.TxIDs = false
	res := e.run(t.Context(), "push", scenarios["push"])
	requireVerified(t, res)
	require.False(t, *res.TransactionIDs)
	msgs := popAll(t, e)
	require.Len(t, msgs, e.N)
	for _, m := range msgs {
		require.Equal(t, string(m.ID), string(m.TransactionID))
	}
}

func TestPushTallyCountsTheDuplicatesABrokerAnswers(t *testing.T) {
	b := brokertest.Shared(t)
	q := b.Q("dup-q")
	e := env(t, b, q)
	body := `{"items":[{"queue":"` + q + `","transactionId":"t1","payload":1},{"queue":"` + q + `","transactionId":"t1","payload":2},` +
		`{"queue":"` + q + `","transactionId":"t2","payload":3}]}`
	_, answer, err := e.Do(t.Context(), "POST", "/api/v1/push", []byte(body), false)
	require.NoError(t, err)
	var tl tally
	tl.add(answer)
	require.Equal(t, int64(2), tl.queued.Load())
	require.Equal(t, int64(1), tl.duplicate.Load())
}

func TestPushScenarioReportsCPUAndMemoryOfTheWatchedProcesses(t *testing.T) {
	b := brokertest.Shared(t)
	e := env(t, b, b.Q("watched-q"))
	// The broker runs in this process; PostgreSQL's postmaster is the
	// parent of the backend serving this query.
	backend, err := b.DB.Backend(t.Context())
	require.NoError(t, err)
	st, err := readStat(fmt.Sprint(backend))
	require.NoError(t, err)
	e.BrokerPID, e.PostgresPID = os.Getpid(), st.ppid
	res := e.run(t.Context(), "push", scenarios["push"])
	requireVerified(t, res)
	require.Greater(t, res.BrokerRSSPeakMB, 1.0)
	require.ElementsMatch(t, []string{"broker", "postgres", "tool"}, keys(res.CPUSeconds))
	require.ElementsMatch(t, []string{"broker", "postgres", "tool"}, keys(res.CPUMsPerRequest))
	for k, v := range res.CPUSeconds {
		require.GreaterOrEqual(t, v, 0.0, k)
		require.InDelta(t, v*1000/float64(res.Requests), res.CPUMsPerRequest[k], 1e-9, k)
	}
}

func TestRunsWithoutWatchedProcessesReportOnlyTheToolsCPU(t *testing.T) {
	b := brokertest.Shared(t)
	res := env(t, b, b.Q("unwatched-q")).run(t.Context(), "push", scenarios["push"])
	requireVerified(t, res)
	require.Zero(t, res.BrokerRSSPeakMB)
	require.Equal(t, []string{"tool"}, keys(res.CPUSeconds))
}

func keys(m map[string]float64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestPopAckScenarioVerifiesExactlyNDistinct(t *testing.T) {
	b := brokertest.Shared(t)
	q := b.Q("popack-q")
	res := env(t, b, q).run(t.Context(), "popack", scenarios["popack"])
	requireVerified(t, res)
	stored := b.Stored(t, q)
	require.Equal(t, stored.NextOffset, stored.Committed, "everything was acknowledged")
}

func TestPopAckScenarioReportsMissingMessages(t *testing.T) {
	b := brokertest.Shared(t)
	e := env(t, b, b.Q("short-q"))
	require.NoError(t, e.prefill(t.Context()))
	e.N, e.Prefilled = 300, true // more than the queue holds
	res := e.run(t.Context(), "popack", scenarios["popack"])
	require.False(t, *res.Verified)
	require.Contains(t, res.Verification, "205 distinct of 300")
}

func TestCycleScenarioVerifiesExactlyOnce(t *testing.T) {
	b := brokertest.Shared(t)
	grantStreams(t, b)
	q := b.Q("cycle-q")
	res := env(t, b, q).run(t.Context(), "cycle", scenarios["cycle"])
	requireVerified(t, res)
	require.Greater(t, res.CyclesPerSec, 0.0)
	id, _, err := b.DB.StreamQueryNamed(t.Context(), b.Tenant, q+".q")
	require.NoError(t, err)
	require.Equal(t, 4*4, b.StateRows(t, id), "S state rows per source partition")
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

func TestSummaryGivesTheMedianCPUPerRequestAndTheLargestRSSPeak(t *testing.T) {
	run := func(broker, tool, rss float64) *Result {
		return &Result{Scenario: "push", MsgsPerSec: 5, P50Ms: 1, P99Ms: 2, BrokerRSSPeakMB: rss,
			CPUMsPerRequest: map[string]float64{"broker": broker, "tool": tool}}
	}
	require.Equal(t, "# push, median of 3 runs: 5 msgs/s, p50 1.000 ms, p99 2.000 ms; CPU per request: broker 0.200 ms tool 0.050 ms; broker RSS peak 61.5 MB",
		summary([]*Result{run(0.3, 0.05, 40), run(0.1, 0.04, 61.5), run(0.2, 0.06, 50)}))
}

// -node-pids: a Citus cluster's nodes, by name, after the broker and
// before the tool.
func TestSummaryGivesEachCitusNodesCPUPerRequest(t *testing.T) {
	r := &Result{Scenario: "pop", MsgsPerSec: 5, P50Ms: 1, P99Ms: 2,
		CPUMsPerRequest: map[string]float64{"broker": 0.2, "worker2": 0.3, "coordinator": 0.1, "worker1": 0.4, "tool": 0.05}}
	require.Equal(t, "# pop, median of 1 runs: 5 msgs/s, p50 1.000 ms, p99 2.000 ms; CPU per request: broker 0.200 ms coordinator 0.100 ms worker1 0.400 ms worker2 0.300 ms tool 0.050 ms",
		summary([]*Result{r}))
}

func TestDropDeletesTheRunsQueueAndTheQueuesItMade(t *testing.T) {
	b := brokertest.Shared(t)
	grantStreams(t, b)
	q := b.Q("drop-q")
	e := env(t, b, q)
	requireVerified(t, e.run(t.Context(), "cycle", scenarios["cycle"]))
	count := func() (n int) {
		for _, queue := range []string{q, q + ".sink"} {
			if b.Stored(t, queue).Exists {
				n++
			}
		}
		return n
	}
	require.Equal(t, 2, count(), "the source and the sink")
	require.NoError(t, e.Drop(t.Context()))
	require.Zero(t, count(), "nothing of the run left")
}

// grantStreams lets the tenant register queries: with tenancy on (secure
// mode) it needs a grant.
func grantStreams(t *testing.T, b *brokertest.Broker) {
	b.Grant(t, b.Tenant, nil)
}

// runKeyed runs scenario name with 7 keys in a namespace of its own, and
// requires it verified.
func runKeyed(t *testing.T, name string) (*brokertest.Broker, *Env, *Result) {
	b := brokertest.Shared(t)
	grantStreams(t, b)
	e := env(t, b, b.Q(name+"-q"))
	e.Keys = 7
	res := e.run(t.Context(), name, scenarios[name])
	requireVerified(t, res)
	require.Equal(t, 7, res.Keys)
	return b, e, res
}

func TestStockScenarioFoldsEveryEventOnceIntoItsKeysWindow(t *testing.T) {
	b, e, res := runKeyed(t, "stock")
	require.ElementsMatch(t, []string{"tool"}, keys(res.CPUMsPer1000Msgs))
	require.InDelta(t, res.CPUSeconds["tool"]*1e6/float64(e.N), res.CPUMsPer1000Msgs["tool"], 1e-9)
	// Each event is counted once: in a window still open in the state, or
	// in one a fold or the flush emitted (a run across a minute's end).
	count := map[string]int{}
	id, _, err := b.DB.StreamQueryNamed(t.Context(), b.Tenant, e.Queue+".stock")
	require.NoError(t, err)
	state, err := b.DB.StateOf(t.Context(), id)
	require.NoError(t, err)
	for _, row := range state {
		if row.Key == "wm" {
			continue
		}
		var w struct {
			Key   string `json:"key"`
			Count int    `json:"count"`
		}
		require.NoError(t, json.Unmarshal([]byte(row.Value), &w))
		count[w.Key] += w.Count
	}
	parts, err := b.Log(t.Context(), b.Tenant, e.Queue+".out")
	require.NoError(t, err)
	for _, p := range parts {
		for _, f := range p.Frames {
			var w struct {
				Key   string `json:"key"`
				Count int    `json:"count"`
			}
			require.NoError(t, json.Unmarshal(f.Payload, &w))
			count[w.Key] += w.Count
		}
	}
	want := map[string]int{}
	for id := range e.N {
		want[fmt.Sprintf("k%d", id%e.Keys)]++
	}
	require.Equal(t, want, count)
}

func TestPipelineScenarioWithKeysFoldsEveryEvent(t *testing.T) {
	_, _, res := runKeyed(t, "pipeline")
	require.Contains(t, res.CPUMsPer1000Msgs, "tool")
}
