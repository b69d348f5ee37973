package sqlquery

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/pipeline"
)

// The same events through a query written in SQL and through the pipeline
// a user would write by hand in CEL, folded by package pipeline in the
// same batches: the outputs must be identical, pushes and counts alike.

const (
	allAggregates = `count(*) AS orders, sum((payload->>'amount')::numeric) AS revenue, min((payload->>'amount')::numeric) AS low,
		max((payload->>'amount')::numeric) AS high, avg((payload->>'amount')::numeric) AS mean,
		first(payload->'amount') AS opening, last(payload->'amount') AS closing`
	handProject = `{"region": key, "orders": orders, "revenue": revenue, "low": low, "high": high, "mean": mean, "opening": opening, "closing": closing, "window_start": windowStart, "window_end": windowEnd}`
)

func handAggregates() []v1.Aggregate {
	return []v1.Aggregate{{Name: "orders", Fn: v1.FnCount}, {Name: "revenue", Fn: v1.FnSum, Of: "payload.amount"},
		{Name: "low", Fn: v1.FnMin, Of: "payload.amount"}, {Name: "high", Fn: v1.FnMax, Of: "payload.amount"},
		{Name: "mean", Fn: v1.FnAvg, Of: "payload.amount"}, {Name: "opening", Fn: v1.FnFirst, Of: "payload.amount"},
		{Name: "closing", Fn: v1.FnLast, Of: "payload.amount"}}
}

func TestTumblingWindowsWithHavingFilterAndLatenessGiveWhatTheirCELFormGives(t *testing.T) {
	sameOutputs(t, `SELECT payload->>'region' AS region, `+allAggregates+`, window_start, window_end
		FROM orders WHERE payload->>'status' <> 'void'
		GROUP BY payload->>'region', TUMBLE((payload->>'ts')::bigint, INTERVAL '10 seconds', lateness => INTERVAL '5 seconds', late => 'orders.late')
		HAVING count(*) >= 2`,
		v1.Pipeline{Filter: `payload.status != "void"`, KeyBy: "payload.region", EventTime: "payload.ts", Late: "orders.late",
			Window:    &v1.Window{Type: v1.WindowTumbling, Size: dur(10 * time.Second), AllowedLateness: dur(5 * time.Second)},
			Aggregate: handAggregates(), Having: "orders >= 2", Project: handProject})
}

func TestHopWindowsWithHavingFilterAndLatenessGiveWhatTheirCELFormGives(t *testing.T) {
	sameOutputs(t, `SELECT payload->>'region' AS region, `+allAggregates+`, window_start, window_end
		FROM orders WHERE (payload->>'amount')::numeric > -10
		GROUP BY payload->>'region', HOP((payload->>'ts')::bigint, INTERVAL '5s', INTERVAL '15s', lateness => INTERVAL '2s')
		HAVING sum((payload->>'amount')::numeric) > 100 OR payload->>'region' = 'acme'`,
		v1.Pipeline{Filter: `payload.amount > -10`, KeyBy: "payload.region", EventTime: "payload.ts",
			Window:    &v1.Window{Type: v1.WindowSliding, Size: dur(15 * time.Second), Slide: dur(5 * time.Second), AllowedLateness: dur(2 * time.Second)},
			Aggregate: handAggregates(), Having: `revenue > 100.0 || key == "acme"`, Project: handProject})
}

func TestSessionWindowsWithHavingFilterAndLatenessGiveWhatTheirCELFormGives(t *testing.T) {
	sameOutputs(t, `SELECT payload->>'region' AS region, `+allAggregates+`, window_start, window_end
		FROM orders WHERE payload->>'status' IN ('paid', 'open')
		GROUP BY payload->>'region', SESSION((payload->>'ts')::bigint, INTERVAL '3 seconds', lateness => INTERVAL '1 second')
		HAVING max((payload->>'amount')::numeric) - min((payload->>'amount')::numeric) >= 20`,
		v1.Pipeline{Filter: `payload.status in ["paid", "open"]`, KeyBy: "payload.region", EventTime: "payload.ts",
			Window:    &v1.Window{Type: v1.WindowSession, Gap: dur(3 * time.Second), AllowedLateness: dur(1 * time.Second)},
			Aggregate: handAggregates(), Having: "high - low >= 20.0", Project: handProject})
}

func TestAStatelessQueryGivesWhatItsCELFormGives(t *testing.T) {
	sameOutputs(t, `SELECT payload->>'region' AS region, (payload->>'amount')::numeric * 2 AS double_amount, transaction_id
		FROM orders WHERE payload->>'status' = 'paid' AND (payload->>'amount')::numeric BETWEEN 0 AND 100`,
		v1.Pipeline{Filter: `payload.status == "paid" && payload.amount >= 0 && payload.amount <= 100`,
			Project: `{"region": payload.region, "double_amount": double(payload.amount) * 2.0, "transaction_id": transactionId}`})
}

// sameOutputs folds random streams through both forms and compares.
func sameOutputs(t *testing.T, sql string, hand v1.Pipeline) {
	t.Helper()
	q, err := Compile(sql)
	if err != nil {
		t.Fatal(err)
	}
	h, err := pipeline.Compile(hand)
	if err != nil {
		t.Fatal(err)
	}
	emitted, late := 0, 0
	for seed := range uint64(10) {
		events := streamOf(rand.New(rand.NewPCG(seed, 38)), 300)
		batches := rand.New(rand.NewPCG(seed, 1))
		sizes := make([]int, 0, len(events))
		for n := 0; n < len(events); {
			size := min(1+batches.IntN(40), len(events)-n)
			sizes, n = append(sizes, size), n+size
		}
		gotPush, gotCounts := fold(t, q.Program, events, sizes)
		wantPush, wantCounts := fold(t, h, events, sizes)
		if gotCounts != wantCounts {
			t.Fatalf("seed %d: SQL counts %+v, CEL counts %+v", seed, gotCounts, wantCounts)
		}
		if !slices.Equal(gotPush, wantPush) {
			t.Fatalf("seed %d: SQL pushed %d, CEL pushed %d\nSQL %v\nCEL %v", seed, len(gotPush), len(wantPush), gotPush, wantPush)
		}
		emitted, late = emitted+gotCounts.Emitted, late+gotCounts.Late
	}
	if emitted < 50 || (hand.Window != nil && late == 0) {
		t.Errorf("%d emitted, %d late over all seeds: the streams test nothing", emitted, late)
	}
}

// streamOf is orders with some disorder, some late by far, some filtered.
func streamOf(rng *rand.Rand, n int) []pipeline.Event {
	regions := []string{"acme", "globex", "initech"}
	statuses := []string{"paid", "open", "void"}
	ts := int64(1_760_000_000_000)
	out := make([]pipeline.Event, n)
	for i := range out {
		ts += int64(rng.IntN(2000))
		at := ts - int64(rng.IntN(1500))
		if rng.IntN(40) == 0 {
			at -= 120_000
		}
		data := fmt.Sprintf(`{"region":%q,"status":%q,"amount":%d,"ts":%d}`,
			regions[rng.IntN(len(regions))], statuses[rng.IntN(len(statuses))], rng.IntN(200)-20, at)
		out[i] = pipeline.Event{Data: json.RawMessage(data), TransactionID: "t" + strconv.Itoa(i), CreatedAt: time.UnixMilli(ts)}
	}
	return out
}

// fold runs the events through p in the given batches, each a cycle from
// the state the last one left, then flushes; it returns every push, as
// queue and payload, and the counts.
func fold(t *testing.T, p *pipeline.Program, events []pipeline.Event, sizes []int) ([]string, pipeline.Counts) {
	t.Helper()
	rows := map[string]pipeline.Row{}
	var pushed []string
	var total pipeline.Counts
	scope := pipeline.Scope{QueryID: "q", PartitionID: "pid", Partition: "p0", Sink: "sink"}
	cycle := func(batch []pipeline.Event, flush bool) {
		var state []pipeline.Row
		for _, r := range rows {
			state = append(state, r)
		}
		s, err := p.NewShard(scope, state)
		if err != nil {
			t.Fatal(err)
		}
		now := time.UnixMilli(1_760_000_000_000)
		s.Fold(batch)
		if flush {
			s.Flush(time.UnixMilli(1 << 50))
		}
		ops, pushes, err := s.Commit(&now)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range s.Errors {
			t.Errorf("evaluation error: %v", e)
		}
		for _, op := range ops {
			if op.Type == "delete" {
				delete(rows, op.Key)
			} else {
				rows[op.Key] = pipeline.Row{Key: op.Key, Value: op.Value, UpdatedAt: strconv.Itoa(len(pushed))}
			}
		}
		for _, pu := range pushes {
			pushed = append(pushed, pu.Queue+" "+string(pu.Payload))
		}
		total.In, total.Filtered, total.Late = total.In+s.In, total.Filtered+s.Filtered, total.Late+s.Late
		total.Failed, total.Emitted = total.Failed+s.Failed, total.Emitted+s.Emitted
	}
	i := 0
	for _, n := range sizes {
		cycle(events[i:i+n], false)
		i += n
	}
	cycle(nil, true)
	return pushed, total
}

// The README's revenue example: the query in SQL emits what its YAML
// pipeline emits, on the README's events.
func TestTheReadmesRevenueQueryInSQLEmitsWhatItsPipelineDoes(t *testing.T) {
	q, err := Compile(`SELECT payload->>'customer' AS customer, window_start AS minute, count(*) AS orders,
       sum((payload->>'amount')::numeric) AS revenue, avg((payload->>'amount')::numeric) AS average
FROM orders
WHERE (payload->>'amount')::numeric > 0
GROUP BY payload->>'customer', TUMBLE((payload->>'ts')::timestamptz, INTERVAL '1 minute', idle_flush => INTERVAL '2s')
HAVING count(*) >= 2`)
	if err != nil {
		t.Fatal(err)
	}
	hand, err := pipeline.Parse([]byte(`pipeline:
  filter: "payload.amount > 0"
  keyBy: "payload.customer"
  eventTime: "timestamp(payload.ts)"
  window: {type: Tumbling, size: 60s, idleFlush: 2s}
  aggregate:
    - {name: orders, fn: count}
    - {name: revenue, fn: sum, of: "payload.amount"}
    - {name: average, fn: avg, of: "payload.amount"}
  having: "orders >= 2"
  project: "{'customer': key, 'minute': windowStart, 'orders': orders, 'revenue': revenue, 'average': average}"`))
	if err != nil {
		t.Fatal(err)
	}
	h, err := pipeline.Compile(hand)
	if err != nil {
		t.Fatal(err)
	}
	var events []pipeline.Event
	for i, e := range []string{
		`{"customer":"acme","amount":120,"ts":"2026-08-17T10:00:05Z"}`, `{"customer":"acme","amount":80,"ts":"2026-08-17T10:00:40Z"}`,
		`{"customer":"acme","amount":-5,"ts":"2026-08-17T10:00:41Z"}`, `{"customer":"globex","amount":30,"ts":"2026-08-17T10:00:50Z"}`,
		`{"customer":"acme","amount":45,"ts":"2026-08-17T10:01:10Z"}`} {
		events = append(events, pipeline.Event{Data: json.RawMessage(e), TransactionID: strconv.Itoa(i), CreatedAt: time.Now()})
	}
	got, _ := fold(t, q.Program, events, []int{len(events)})
	want, _ := fold(t, h, events, []int{len(events)})
	const readme = `sink {"average":100,"customer":"acme","minute":"2026-08-17T10:00:00.000Z","orders":2,"revenue":200}`
	if !slices.Equal(got, want) || len(got) != 1 || got[0] != readme {
		t.Fatalf("SQL pushed %v, the pipeline %v; the README shows %s", got, want, readme)
	}
}
