package streams_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/domain/hotlist"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

type cycleAnswer struct {
	Success         bool             `json:"success"`
	Error           string           `json:"error"`
	Deferred        string           `json:"deferred"`
	QueryID         string           `json:"query_id"`
	PartitionID     string           `json:"partition_id"`
	QueueName       *string          `json:"queueName"`
	StateOpsApplied int              `json:"state_ops_applied"`
	PushResults     []map[string]any `json:"push_results"`
	AckResult       *struct {
		Success       bool  `json:"success"`
		Count         int64 `json:"count"`
		LeaseReleased bool  `json:"lease_released"`
		DLQ           bool  `json:"dlq"`
	} `json:"ack_result"`
}

// cycle posts a cycle and requires a 200, whatever its success.
func cycle(t testing.TB, b *brokertest.Broker, body map[string]any) cycleAnswer {
	t.Helper()
	r := post(t, b, "/streams/v1/cycle", body)
	wantStatus(t, r, 200)
	var a cycleAnswer
	r.JSON(t, &a)
	return a
}

// committed requires a successful cycle.
func committed(t testing.TB, b *brokertest.Broker, body map[string]any) cycleAnswer {
	t.Helper()
	a := cycle(t, b, body)
	if !a.Success {
		t.Fatalf("cycle failed: %s", a.Error)
	}
	return a
}

// refused requires a cycle that answered 200 with success false and an
// error containing want.
func refused(t testing.TB, b *brokertest.Broker, body map[string]any, want string) {
	t.Helper()
	a := cycle(t, b, body)
	if a.Success || !strings.Contains(a.Error, want) {
		t.Fatalf("cycle answered success=%v error=%q, want a failure saying %q", a.Success, a.Error, want)
	}
}

// fixture is a registered query "q" on source queue src, sink out, all
// three named in the test's namespace.
type fixture struct {
	b         *brokertest.Broker
	query     string
	partition string // src's partition Default
	src, out  string
	group     string // the query's consumer group, as its worker names it
}

// newFixture is a fixture on the shared broker, or, given options, on a
// broker of the test's own.
func newFixture(t testing.TB, opts ...brokertest.Option) fixture {
	t.Helper()
	if len(opts) == 0 {
		return fixtureOn(t, shared(t))
	}
	return fixtureOn(t, start(t, opts...))
}

func fixtureOn(t testing.TB, b *brokertest.Broker) fixture {
	t.Helper()
	q := register(t, b, "q", "src", "out", "h", false)
	return fixture{b: b, query: q.QueryID, partition: sourcePartition(t, b, "src"), src: b.Q("src"), out: b.Q("out"), group: "streams." + b.Q("q")}
}

// body is a cycle request on the fixture's query and partition.
func (f fixture) body(fields map[string]any) map[string]any {
	out := map[string]any{"query_id": f.query, "partition_id": f.partition}
	for k, v := range fields {
		out[k] = v
	}
	return out
}

func (f fixture) state(t testing.TB) map[string]string {
	t.Helper()
	return f.b.State(t, f.query, f.partition)
}

// wantNothingWritten requires that a refused cycle left no state row and
// no message on sink, and the default group's cursor as it was.
func (f fixture) wantNothingWritten(t testing.TB, sink string, before cursor) {
	t.Helper()
	if got := f.state(t); len(got) != 0 {
		t.Fatalf("state %v written by a refused cycle", got)
	}
	if n := sinkMessages(t, f.b, sink); n != 0 {
		t.Fatalf("%d sink messages pushed by a refused cycle", n)
	}
	if after := f.cursor(t, "__QUEUE_MODE__"); after != before {
		t.Fatalf("cursor %+v after a refused cycle, was %+v", after, before)
	}
}

type cursor struct {
	Committed     int64
	Leased        bool
	LeaseID       string
	RetryCount    int
	TotalConsumed int64
}

func (f fixture) cursor(t testing.TB, group string) cursor {
	t.Helper()
	for _, s := range f.b.Cursors(t, f.src) {
		if s.Partition != "Default" || s.Group != group {
			continue
		}
		c := cursor{Committed: s.Committed, RetryCount: s.RetryCount, TotalConsumed: s.TotalConsumed}
		if s.LeaseID != nil {
			c.Leased, c.LeaseID = true, *s.LeaseID
		}
		return c
	}
	t.Fatalf("no cursor of group %s on %s/Default", group, f.src)
	return cursor{}
}

// pop pops up to batch messages of queue's partition Default; nil on 204.
func pop(t testing.TB, b *brokertest.Broker, queue string, batch int, query string) *brokertest.Popped {
	t.Helper()
	r := b.Do(t, "GET", fmt.Sprintf("/api/v1/pop/queue/%s/partition/Default?batch=%d&%s", queue, batch, query), "", nil)
	if r.Status == 204 {
		return nil
	}
	wantStatus(t, r, 200)
	var p brokertest.Popped
	r.JSON(t, &p)
	return &p
}

// parkedPop starts a long-polling pop of queue's partition Default and
// answers on the channel: the batch, or nil on a 204 or any failure. It does
// not fail the test itself, since it runs on a goroutine of its own.
func parkedPop(b *brokertest.Broker, queue, query string) <-chan *brokertest.Popped {
	got := make(chan *brokertest.Popped, 1)
	go func() {
		req, err := http.NewRequest("GET", b.URL+"/api/v1/pop/queue/"+queue+"/partition/Default?wait=true&timeout=30000&"+query, nil)
		if err != nil {
			got <- nil
			return
		}
		if b.Token != "" {
			req.Header.Set("Authorization", "Bearer "+b.Token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- nil
			return
		}
		defer resp.Body.Close()
		var p brokertest.Popped
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&p) != nil {
			got <- nil
			return
		}
		got <- &p
	}()
	return got
}

func ack(lease string, status any, count any) map[string]any {
	a := map[string]any{"leaseId": lease, "transactionId": "t"}
	if status != nil {
		a["status"] = status
	}
	if count != nil {
		a["count"] = count
	}
	return a
}

func TestCycleMissingOrMalformedFieldsAre400(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := uuid.NewString()
	want400(t, f.b, "/streams/v1/cycle", map[string]string{
		`{"partition_id": "` + id + `"}`:                                                                                                       "query_id",
		`{"query_id": "", "partition_id": "` + id + `"}`:                                                                                       "query_id",
		`{"query_id": "` + id + `"}`:                                                                                                           "partition_id",
		`{"query_id": "` + id + `", "partition_id": ""}`:                                                                                       "partition_id",
		`{"query_id": "x", "partition_id": "` + id + `"}`:                                                                                      "query_id",
		`{"query_id": "` + id + `", "partition_id": "` + id + `", "state_ops": {}}`:                                                            "state_ops",
		`{"query_id": "` + id + `", "partition_id": "` + id + `", "push_items": {}}`:                                                           "push_items",
		`{"query_id": "` + id + `", "partition_id": "` + id + `", "ack": []}`:                                                                  "ack",
		`{"query_id": "` + id + `", "partition_id": "` + id + `", "release_lease": "no"}`:                                                      "release_lease",
		`{"query_id": "` + id + `", "partition_id": "` + id + `", "ack": {"count": -1}}`:                                                       "count",
		`{"query_id": "` + id + `", "partition_id": "` + id + `", "ack": {"leaseId": "x"}}`:                                                    "leaseId",
		`{"query_id": "` + id + `", "partition_id": "` + id + `", "push_items": [{"queue": "out", "messageId": "x"}]}`:                         "messageId",
		`{"query_id": "` + id + `", "partition_id": "` + f.partition + `", "push_items": [{"queue": "bad name"}]}`:                             "queue name",
		`{"query_id": "` + id + `", "partition_id": "` + id + `", "push_items": [{"queue": "out"}, {"queue": "out", "partition": "p\u0000"}]}`: "push_items[1].partition",
		`{"query_id": "` + id + `", "partition_id": "` + id + `", "push_items": [{"queue": "out", "transactionId": "\u0000"}]}`:                "push_items[0].transactionId",
	})
}

func TestCycleStateOpsAreAppliedInOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := committed(t, f.b, f.body(map[string]any{"ack": nil, "state_ops": []any{
		map[string]any{"type": "upsert", "key": "a", "value": map[string]any{"acc": 1}},
		map[string]any{"type": "upsert", "key": "a", "value": map[string]any{"acc": 2}},
		map[string]any{"type": "upsert", "key": "b", "value": 7},
		map[string]any{"type": "delete", "key": "b"},
		map[string]any{"type": "delete", "key": "c"},
		map[string]any{"type": "upsert", "key": "c", "value": nil},
	}}))
	if a.StateOpsApplied != 6 {
		t.Fatalf("state_ops_applied %d, want 6", a.StateOpsApplied)
	}
	got := f.state(t)
	if len(got) != 2 || got["a"] != `{"acc": 2}` || got["c"] != "null" {
		t.Fatalf("state %v, want a={acc:2} and c=null (b upserted then deleted)", got)
	}
}

func TestCycleStateOpsAndPushItemsDefaultToEmpty(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, fields := range []map[string]any{{}, {"state_ops": nil, "push_items": nil, "ack": nil}} {
		a := committed(t, f.b, f.body(fields))
		if a.StateOpsApplied != 0 || len(a.PushResults) != 0 || a.AckResult != nil || *a.QueueName != f.src {
			t.Fatalf("empty cycle answered %+v", a)
		}
	}
}

func TestCycleUnknownStateOpTypeFailsTheWholeCycleAndCommitsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	committed(t, f.b, f.body(map[string]any{"state_ops": []any{map[string]any{"type": "upsert", "key": "a", "value": 1}}}))
	f.b.PushN(t, f.src, "", 0, 3)
	p := pop(t, f.b, f.src, 10, "")
	before := f.cursor(t, "__QUEUE_MODE__")
	refused(t, f.b, f.body(map[string]any{
		"state_ops": []any{
			map[string]any{"type": "upsert", "key": "a", "value": 2},
			map[string]any{"type": "delete", "key": "a"},
			map[string]any{"type": "upsret", "key": "b", "value": 3},
		},
		"push_items": []any{map[string]any{"queue": f.out, "payload": 1}},
		"ack":        ack(p.LeaseID, "completed", 3),
	}), `unknown type "upsret"`)
	if got := f.state(t); len(got) != 1 || got["a"] != "1" {
		t.Fatalf("state %v after a failed cycle, want a=1 untouched", got)
	}
	if after := f.cursor(t, "__QUEUE_MODE__"); after != before {
		t.Fatalf("cursor %+v after a failed cycle, want %+v", after, before)
	}
	if sinkMessages(t, f.b, f.out) != 0 {
		t.Fatal("a failed cycle's sink push was stored")
	}
}

// sinkMessages counts the frames stored in the log of b's tenant's queue.
func sinkMessages(t testing.TB, b *brokertest.Broker, queue string) int {
	t.Helper()
	return b.Stored(t, queue).Frames
}

func TestCyclePushItemPartitionDefaultsToDefaultAndDataIsThePayload(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := committed(t, f.b, f.body(map[string]any{"push_items": []any{
		map[string]any{"queue": f.out, "data": map[string]any{"n": 1}},
		map[string]any{"queue": f.out, "payload": map[string]any{"n": 2}},
	}}))
	for _, r := range a.PushResults {
		if r["queue"] != f.out || r["partition"] != "Default" || r["status"] != "queued" {
			t.Fatalf("push result %v, want queued on out/Default", r)
		}
	}
	if got := pop(t, f.b, f.out, 10, "").Ns(); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("sink delivered %v, want [1 2]", got)
	}
}

func TestCyclePushItemWithAnEmptyQueueIsSkipped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := committed(t, f.b, f.body(map[string]any{"push_items": []any{
		map[string]any{"queue": "", "payload": 1},
		map[string]any{"payload": 2},
		map[string]any{"queue": f.out, "payload": map[string]any{"n": 3}},
	}}))
	if len(a.PushResults) != 3 || a.PushResults[0]["status"] != "skipped" || a.PushResults[1]["status"] != "skipped" ||
		a.PushResults[2]["status"] != "queued" {
		t.Fatalf("push results %v, want skipped, skipped, queued", a.PushResults)
	}
	if n := sinkMessages(t, f.b, f.out); n != 1 {
		t.Fatalf("%d sink messages, want 1", n)
	}
}

func TestCyclePushItemMessageIdAndTransactionIdAreHonoured(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	mid := uuid.NewString()
	a := committed(t, f.b, f.body(map[string]any{"push_items": []any{
		map[string]any{"queue": f.out, "partition": "p1", "payload": map[string]any{"n": 1}, "messageId": mid, "transactionId": "win-1"},
	}}))
	if a.PushResults[0]["messageId"] != mid || a.PushResults[0]["transactionId"] != "win-1" || a.PushResults[0]["partition"] != "p1" {
		t.Fatalf("push result %v, want messageId %s, transactionId win-1 on p1", a.PushResults[0], mid)
	}
	r := f.b.Do(t, "GET", "/api/v1/pop/queue/"+f.out+"/partition/p1", "", nil)
	wantStatus(t, r, 200)
	var p brokertest.Popped
	r.JSON(t, &p)
	if p.Messages[0].ID != mid || p.Messages[0].TransactionID != "win-1" {
		t.Fatalf("brokertest.Popped id %s transactionId %s, want %s win-1", p.Messages[0].ID, p.Messages[0].TransactionID, mid)
	}
}

func TestCyclePushItemWithoutIdsGetsAUUIDv7ReusedAsTransactionId(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := committed(t, f.b, f.body(map[string]any{"push_items": []any{map[string]any{"queue": f.out, "payload": map[string]any{"n": 1}}}}))
	id, err := uuid.Parse(fmt.Sprint(a.PushResults[0]["messageId"]))
	if err != nil || id.Version() != 7 || a.PushResults[0]["transactionId"] != id.String() {
		t.Fatalf("push result %v, want a UUIDv7 message id reused as the transaction id", a.PushResults[0])
	}
	if p := pop(t, f.b, f.out, 1, ""); p.Messages[0].ID != id.String() || p.Messages[0].TransactionID != id.String() {
		t.Fatalf("brokertest.Popped %+v, want id and transactionId %s", p.Messages[0], id)
	}
}

func TestCycleSinkQueuesAreAutoCreatedUnderTheRequestTenant(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	fresh := f.b.Q("fresh.sink")
	committed(t, f.b, f.body(map[string]any{"push_items": []any{map[string]any{"queue": fresh, "payload": 1}}}))
	if !f.b.Stored(t, fresh).Exists {
		t.Fatalf("sink queue not created under tenant %q", f.b.Tenant)
	}
	if n := sinkMessages(t, f.b, fresh); n != 1 {
		t.Fatalf("%d messages on the auto-created sink, want 1", n)
	}
}

func TestCyclePushItemRepeatingATransactionIdIsADuplicate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	first := committed(t, f.b, f.body(map[string]any{"push_items": []any{
		map[string]any{"queue": f.out, "payload": 1, "transactionId": "w1"},
		map[string]any{"queue": f.out, "payload": 1, "transactionId": "w1"},
	}}))
	if first.PushResults[0]["status"] != "queued" || first.PushResults[1]["status"] != "duplicate" ||
		first.PushResults[1]["messageId"] != first.PushResults[0]["messageId"] {
		t.Fatalf("push results %v, want queued then a duplicate of it", first.PushResults)
	}
	again := committed(t, f.b, f.body(map[string]any{
		"state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": 1}},
		"push_items": []any{
			map[string]any{"queue": f.out, "payload": 2, "transactionId": "w1"},
			map[string]any{"queue": f.out, "payload": 3, "transactionId": "w2"},
		}}))
	if again.PushResults[0]["status"] != "duplicate" || again.PushResults[0]["messageId"] != first.PushResults[0]["messageId"] ||
		again.PushResults[1]["status"] != "queued" {
		t.Fatalf("push results %v, want a duplicate of the first cycle's message, then queued", again.PushResults)
	}
	if n := sinkMessages(t, f.b, f.out); n != 2 {
		t.Fatalf("%d sink messages, want 2 (w1 once, w2)", n)
	}
	if got := f.state(t); got["k"] != "1" {
		t.Fatalf("state %v: the cycle with a duplicate did not commit its state ops", got)
	}
}

func TestCycleAckOkAndReleaseJumpsToBatchEndAndClearsTheLeaseAndRetryState(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 10)
	p := pop(t, f.b, f.src, 4, "")
	if err := f.b.DB.SetRetries(t.Context(), f.b.Tenant, f.src, "Default", "__QUEUE_MODE__", 2); err != nil {
		t.Fatal(err)
	}
	if err := f.b.DB.SetConsumed(t.Context(), f.b.Tenant, f.src, "Default", "__QUEUE_MODE__", 100); err != nil {
		t.Fatal(err)
	}
	a := committed(t, f.b, f.body(map[string]any{"ack": ack(p.LeaseID, "completed", 4)}))
	if a.AckResult == nil || !a.AckResult.Success || a.AckResult.Count != 4 || !a.AckResult.LeaseReleased || a.AckResult.DLQ {
		t.Fatalf("ack_result %+v, want success, count 4, lease released, no dlq", a.AckResult)
	}
	if c := f.cursor(t, "__QUEUE_MODE__"); c.Committed != 4 || c.Leased || c.RetryCount != 0 || c.TotalConsumed != 104 {
		t.Fatalf("cursor %+v, want committed 4, no lease, retry 0, total 104", c)
	}
	if got := pop(t, f.b, f.src, 1, "").Ns(); fmt.Sprint(got) != "[4]" {
		t.Fatalf("next pop %v, want [4]", got)
	}
}

func TestCycleAckWithoutCountAcksTheWholeLeasedBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 10)
	p := pop(t, f.b, f.src, 6, "")
	a := committed(t, f.b, f.body(map[string]any{"ack": map[string]any{"leaseId": p.LeaseID}}))
	if a.AckResult.Count != 6 {
		t.Fatalf("ack_result count %d, want the batch's 6", a.AckResult.Count)
	}
	if c := f.cursor(t, "__QUEUE_MODE__"); c.Committed != 6 || c.TotalConsumed != 6 {
		t.Fatalf("cursor %+v, want committed 6, total 6", c)
	}
}

func TestCycleGatePartialAckAdvancesExactlyCountFramesAcrossARetentionGapAndKeepsTheLease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 3) // offsets 0-2
	f.b.PushN(t, f.src, "", 3, 3) // 3-5, removed by "retention" below
	f.b.PushN(t, f.src, "", 6, 3) // 6-8
	f.b.DropSegment(t, f.src, 3)
	p := pop(t, f.b, f.src, 10, "")
	if fmt.Sprint(p.Ns()) != "[0 1 2 6 7 8]" {
		t.Fatalf("pop across the gap delivered %v", p.Ns())
	}
	a := committed(t, f.b, f.body(map[string]any{"release_lease": false, "ack": ack(p.LeaseID, "completed", 4)}))
	if a.AckResult.Count != 4 || a.AckResult.LeaseReleased {
		t.Fatalf("ack_result %+v, want count 4 and the lease kept", a.AckResult)
	}
	c := f.cursor(t, "__QUEUE_MODE__")
	if c.Committed != 7 || c.LeaseID != p.LeaseID || c.TotalConsumed != 4 {
		t.Fatalf("cursor %+v, want committed 7 (0,1,2 then 6 past the gap), lease %s kept, total 4", c, p.LeaseID)
	}
	// The kept lease still guards the rest of the batch.
	a = committed(t, f.b, f.body(map[string]any{"release_lease": false, "ack": ack(p.LeaseID, "ok", 1)}))
	if c := f.cursor(t, "__QUEUE_MODE__"); c.Committed != 8 || !c.Leased {
		t.Fatalf("cursor %+v after a second partial ack, want committed 8, still leased", c)
	}
	committed(t, f.b, f.body(map[string]any{"ack": ack(p.LeaseID, "ok", 1)}))
	if c := f.cursor(t, "__QUEUE_MODE__"); c.Committed != 9 || c.Leased {
		t.Fatalf("cursor %+v after the final ack, want committed 9, released", c)
	}
}

func TestCycleNackReleasesTheLeaseLeavesTheCursorAndCountsZero(t *testing.T) {
	t.Parallel()
	for _, status := range []string{"failed", "complted", "Completed", ""} {
		t.Run(status, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.b.PushN(t, f.src, "", 0, 5)
			p := pop(t, f.b, f.src, 3, "")
			a := committed(t, f.b, f.body(map[string]any{
				"state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": 1}},
				"ack":       ack(p.LeaseID, status, 3),
			}))
			if a.AckResult.Count != 0 || !a.AckResult.LeaseReleased {
				t.Fatalf("ack_result %+v, want count 0 and the lease released", a.AckResult)
			}
			if c := f.cursor(t, "__QUEUE_MODE__"); c.Committed != 0 || c.Leased || c.TotalConsumed != 0 {
				t.Fatalf("cursor %+v after a nack, want it untouched and unleased", c)
			}
			again := pop(t, f.b, f.src, 3, "")
			if again == nil || fmt.Sprint(again.Ns()) != "[0 1 2]" {
				t.Fatalf("after status %q the batch was not redelivered", status)
			}
		})
	}
}

func TestCycleSuccessWordsAndAnAbsentStatusAck(t *testing.T) {
	t.Parallel()
	for _, status := range []any{"completed", "success", "acked", "ok", nil} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.b.PushN(t, f.src, "", 0, 5)
			p := pop(t, f.b, f.src, 2, "")
			a := committed(t, f.b, f.body(map[string]any{"ack": ack(p.LeaseID, status, 2)}))
			if a.AckResult.Count != 2 {
				t.Fatalf("ack_result %+v, want count 2", a.AckResult)
			}
			if c := f.cursor(t, "__QUEUE_MODE__"); c.Committed != 2 || c.Leased {
				t.Fatalf("status %v did not ack: cursor %+v", status, c)
			}
		})
	}
}

func TestCycleStolenLeaseFailsTheFirstWorkerWithNothingCommitted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 3)
	first := pop(t, f.b, f.src, 3, "")
	f.b.ExpireLeases(t, f.src)
	second := pop(t, f.b, f.src, 3, "")
	if second == nil {
		t.Fatal("the batch was not redelivered after the lease expired")
	}
	refused(t, f.b, f.body(map[string]any{
		"state_ops":  []any{map[string]any{"type": "upsert", "key": "k", "value": 1}},
		"push_items": []any{map[string]any{"queue": f.out, "payload": 1}},
		"ack":        ack(first.LeaseID, "completed", 3),
	}), "another worker")
	if got := f.state(t); len(got) != 0 {
		t.Fatalf("state %v written by a cycle with a stolen lease", got)
	}
	if n := sinkMessages(t, f.b, f.out); n != 0 {
		t.Fatalf("%d sink messages pushed by a cycle with a stolen lease", n)
	}
	if c := f.cursor(t, "__QUEUE_MODE__"); c.Committed != 0 || c.LeaseID != second.LeaseID {
		t.Fatalf("cursor %+v, want committed 0 and the second worker's lease", c)
	}
	committed(t, f.b, f.body(map[string]any{"ack": ack(second.LeaseID, "completed", 3)}))
}

func TestCycleExpiredLeaseFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 3)
	p := pop(t, f.b, f.src, 3, "")
	f.b.ExpireLeases(t, f.src)
	refused(t, f.b, f.body(map[string]any{
		"state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": 1}},
		"ack":       ack(p.LeaseID, "completed", 3),
	}), "expired")
	if got := f.state(t); len(got) != 0 {
		t.Fatalf("state %v written by a cycle with an expired lease", got)
	}
}

func TestCycleAbsentLeaseFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 3)
	refused(t, f.b, f.body(map[string]any{"ack": ack(uuid.NewString(), "completed", 3)}), "no lease")
	p := pop(t, f.b, f.src, 3, "")
	refused(t, f.b, f.body(map[string]any{"ack": map[string]any{"status": "completed", "count": 3}}), "leaseId")
	committed(t, f.b, f.body(map[string]any{"ack": ack(p.LeaseID, "completed", 3)}))
	refused(t, f.b, f.body(map[string]any{"ack": ack(p.LeaseID, "completed", 3)}), "no lease")
}

// The guard has two places: the common ack (a success, released, with a
// count) checks the lease in the statement that applies it, every other ack
// before its work. Each refuses each bad lease, and leaves nothing behind.
func TestCycleLeaseGuardRefusesEveryKindOfAckAndCommitsNothing(t *testing.T) {
	t.Parallel()
	acks := map[string]func(lease string) map[string]any{
		"completed with a count":  func(l string) map[string]any { return map[string]any{"ack": ack(l, "completed", 3)} },
		"completed without count": func(l string) map[string]any { return map[string]any{"ack": ack(l, "completed", nil)} },
		"nack":                    func(l string) map[string]any { return map[string]any{"ack": ack(l, "failed", 3)} },
		"gate partial": func(l string) map[string]any {
			return map[string]any{"ack": ack(l, "completed", 1), "release_lease": false}
		},
	}
	leases := map[string]struct {
		want  string
		lease func(t *testing.T, f fixture) string
	}{
		"none held": {"no lease", func(t *testing.T, f fixture) string {
			p := pop(t, f.b, f.src, 3, "")
			f.b.DropLeases(t, f.src)
			return p.LeaseID
		}},
		"another worker's": {"another worker", func(t *testing.T, f fixture) string {
			pop(t, f.b, f.src, 3, "")
			return uuid.NewString()
		}},
		"expired": {"expired", func(t *testing.T, f fixture) string {
			p := pop(t, f.b, f.src, 3, "")
			f.b.ExpireLeases(t, f.src)
			return p.LeaseID
		}},
	}
	f := newFixture(t)
	for ackName, body := range acks {
		for leaseName, l := range leases {
			t.Run(ackName+"/"+leaseName, func(t *testing.T) {
				f.b.ForgetCursors(t, f.src)
				f.b.PushN(t, f.src, "", 0, 3)
				lease := l.lease(t, f)
				before := f.cursor(t, "__QUEUE_MODE__")
				req := f.body(body(lease))
				req["state_ops"] = []any{map[string]any{"type": "upsert", "key": "k", "value": 1}}
				req["push_items"] = []any{map[string]any{"queue": f.b.Q("guard-out"), "payload": 1}}
				refused(t, f.b, req, l.want)
				f.wantNothingWritten(t, f.b.Q("guard-out"), before)
			})
		}
	}
}

func TestCycleRepeatedAfterItCommittedFailsOnTheLeaseAndChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 3)
	p := pop(t, f.b, f.src, 3, "")
	body := f.body(map[string]any{
		"state_ops":  []any{map[string]any{"type": "upsert", "key": "k", "value": 3}},
		"push_items": []any{map[string]any{"queue": f.out, "payload": 3}},
		"ack":        ack(p.LeaseID, "completed", 3),
	})
	committed(t, f.b, body)
	refused(t, f.b, body, "no lease")
	if n := sinkMessages(t, f.b, f.out); n != 1 {
		t.Fatalf("%d sink messages after a repeated cycle, want 1", n)
	}
	if c := f.cursor(t, "__QUEUE_MODE__"); c.TotalConsumed != 3 {
		t.Fatalf("total_consumed %d after a repeated cycle, want 3", c.TotalConsumed)
	}
}

func TestCycleConsumerGroupDefaultsToQueueMode(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 4)
	p := pop(t, f.b, f.src, 2, "")
	committed(t, f.b, f.body(map[string]any{"consumer_group": "", "ack": ack(p.LeaseID, "completed", 2)}))
	if c := f.cursor(t, "__QUEUE_MODE__"); c.Committed != 2 {
		t.Fatalf("queue-mode cursor %+v, want committed 2", c)
	}
	g := pop(t, f.b, f.src, 2, "consumerGroup=streams.q")
	refused(t, f.b, f.body(map[string]any{"ack": ack(g.LeaseID, "completed", 2)}), "no lease")
	committed(t, f.b, f.body(map[string]any{"consumer_group": "streams.q", "ack": ack(g.LeaseID, "completed", 2)}))
	if c := f.cursor(t, "streams.q"); c.Committed != 2 || c.Leased {
		t.Fatalf("group cursor %+v, want committed 2, released", c)
	}
}

func TestCycleFailureIs200WithTheEnvelopeAndThePostgresMessage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := post(t, f.b, "/streams/v1/cycle", f.body(map[string]any{"state_ops": []any{map[string]any{"type": "nope", "key": "k"}}}))
	wantStatus(t, r, 200)
	m := r.Map(t)
	if m["success"] != false || m["query_id"] != f.query || m["partition_id"] != f.partition ||
		!strings.Contains(fmt.Sprint(m["error"]), `unknown type "nope"`) || m["ack_result"] != nil {
		t.Fatalf("failure envelope %s", r.Body)
	}
	if pr, ok := m["push_results"].([]any); !ok || len(pr) != 0 {
		t.Fatalf("failure envelope push_results %v, want []", m["push_results"])
	}
}

func TestCycleUnknownQueryIsQueryNotFound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	refused(t, f.b, map[string]any{"query_id": uuid.NewString(), "partition_id": f.partition}, "query not found")
}

// The broker checks the state ops before the call, and the procedure
// raises what it found only where it applies them: the ownership verdicts
// still come first, as when the procedure read the ops itself.
func TestCycleABadStateOpIsRefusedOnlyAfterTheOwnershipChecks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	bad := []any{map[string]any{"type": "upsret", "key": "k", "value": 1}}
	refused(t, f.b, map[string]any{"query_id": uuid.NewString(), "partition_id": f.partition, "state_ops": bad}, "query not found")
	refused(t, f.b, f.body(map[string]any{"state_ops": bad}), `state_ops[0]: unknown type "upsret"`)
}

func TestCycleUnknownPartitionIsPartitionNotFound(t *testing.T) {
	t.Parallel()
	if brokertest.Secure() {
		t.Skip("with tenancy on the pre-gate answers 404 first (TestCycleWithTenancyAForeignPartitionIs404)")
	}
	f := newFixture(t)
	refused(t, f.b, map[string]any{"query_id": f.query, "partition_id": uuid.NewString()}, "partition not found")
}

func TestCycleWithTenancyAForeignQueryIs200QueryNotFound(t *testing.T) {
	t.Parallel()
	x := twoTenants(t)
	q, p := queryAs(t, x.b, x.blue), partitionAs(t, x.b, x.red, "src")
	r := x.b.Do(t, "POST", "/streams/v1/cycle", x.red, map[string]any{"query_id": q, "partition_id": p,
		"state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": 1}}})
	wantStatus(t, r, 200)
	if m := r.Map(t); m["success"] != false || m["error"] != "query not found" {
		t.Fatalf("a foreign query answered %s, want 200 success false, query not found", r.Body)
	}
	if n := x.b.StateRows(t, q); n != 0 {
		t.Fatalf("%d state rows written into a foreign query", n)
	}
}

func TestCycleWithTenancyAForeignOrMissingPartitionIs404(t *testing.T) {
	t.Parallel()
	x := twoTenants(t)
	q, foreign := queryAs(t, x.b, x.blue), partitionAs(t, x.b, x.red, "src")
	for _, p := range []string{foreign, uuid.NewString()} {
		r := x.b.Do(t, "POST", "/streams/v1/cycle", x.blue, map[string]any{"query_id": q, "partition_id": p,
			"push_items": []any{map[string]any{"queue": x.b.Q("out"), "payload": 1}}})
		wantNotFound(t, r)
	}
	if n := x.queues(t, x.b.Q("out")); n != 0 {
		t.Fatal("a cycle refused by the ownership gate created its sink queue")
	}
}

func TestCycleWithTenancySinkQueuesResolveWithinTheRequestTenant(t *testing.T) {
	t.Parallel()
	x := twoTenants(t)
	partitionAs(t, x.b, x.red, "out")
	q, p := queryAs(t, x.b, x.blue), partitionAs(t, x.b, x.blue, "src")
	r := x.b.Do(t, "POST", "/streams/v1/cycle", x.blue, map[string]any{"query_id": q, "partition_id": p,
		"push_items": []any{map[string]any{"queue": x.b.Q("out"), "payload": 1}}})
	wantStatus(t, r, 200)
	if n := x.queues(t, x.b.Q("out")); n != 2 {
		t.Fatalf("%d queues named out, want red's and a new one for blue", n)
	}
	if r := x.b.Do(t, "GET", "/api/v1/pop/queue/"+x.b.Q("out"), x.red, nil); r.Status != 204 {
		t.Fatalf("red's same-named queue received blue's sink emit: %d %s", r.Status, r.Body)
	}
}

func TestCycleConcurrentCyclesOnOneQueryAndPartitionAreSerialised(t *testing.T) {
	t.Parallel()
	waitsForTheCycleLock(t, newFixture(t), map[string]any{"ack": nil,
		"state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": 1}}})
}

// A cycle with table rows runs where the query's table is, which on Citus
// is the coordinator, not the partition's worker (queen_streams.cycle_v6),
// and waits for the same lock as every other cycle of its pair.
func TestCycleWithTableRowsIsSerialisedWithTheOtherCyclesOfItsQueryAndPartition(t *testing.T) {
	t.Parallel()
	waitsForTheCycleLock(t, newTableFixture(t, "upsert").fixture, map[string]any{"ack": nil,
		"table_rows": []any{row("a", t0, 1)}})
}

// waitsForTheCycleLock checks that a cycle of fields, on f's query and
// partition, waits while the pair's lock is held, and commits once it is
// released.
func waitsForTheCycleLock(t *testing.T, f fixture, fields map[string]any) {
	t.Helper()
	// Hold the pair's lock, as a running cycle does.
	release, err := f.b.DB.HoldCycleLock(t.Context(), f.query, f.partition)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = release() }) // a failed test's too, or the pool never closes
	done := make(chan cycleAnswer, 1)
	go func() {
		defer close(done) // also when cycle fails the test and exits the goroutine
		done <- cycle(t, f.b, f.body(fields))
	}()
	// The idle-flush cycle must be waiting on the lock, not done.
	brokertest.Eventually(t, 10*time.Second, func() error {
		select {
		case a := <-done:
			t.Fatalf("a cycle ran while another held its (query, partition): %+v", a)
		default:
		}
		if waiting, err := f.b.DB.CycleLockWaiters(t.Context(), f.query, f.partition); err != nil || waiting != 1 {
			return fmt.Errorf("%d waiters for the pair's lock (%v), want the cycle", waiting, err)
		}
		return nil
	})
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if a := <-done; !a.Success {
		t.Fatalf("the cycle failed after the lock was released: %s", a.Error)
	}
}

// A partition that a cycle's sink emits create is placed beside the
// cycle's source partition: on Citus on its shard, so that the cycle,
// which runs on that shard's worker, commits there alone
// (queen.partition_id_near); on PostgreSQL one node holds them all.
func TestACyclesNewSinkPartitionIsPlacedOnItsSourcesShard(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, name := range []string{"a", "b", "c", "d"} {
		committed(t, f.b, f.body(map[string]any{"push_items": []any{
			map[string]any{"queue": f.out, "partition": name, "payload": map[string]any{"n": 1}}}}))
		if src, sink := f.b.Shard(t, f.src, "Default"), f.b.Shard(t, f.out, name); src != sink {
			t.Fatalf("sink partition %s is on shard %d, its source on %d", name, sink, src)
		}
	}
}

func TestCycleSinkEmitWakesAParkedPop(t *testing.T) {
	t.Parallel()
	// A reseed sweep far away: only the cycle's own bookkeeping can make
	// the emit visible in time.
	f := newFixture(t, func(c *config.Config) { c.ReseedInterval = time.Hour })
	// The pop parks on a queue that exists and is empty.
	committed(t, f.b, f.body(map[string]any{"push_items": []any{map[string]any{"queue": f.out, "payload": map[string]any{"n": 0}}}}))
	pop(t, f.b, f.out, 1, "autoAck=true")
	got := parkedPop(f.b, f.out, "batch=1")
	f.b.WaitParked(t, 1)
	start := time.Now()
	committed(t, f.b, f.body(map[string]any{"push_items": []any{map[string]any{"queue": f.out, "payload": map[string]any{"n": 1}}}}))
	p := <-got
	if p == nil || fmt.Sprint(p.Ns()) != "[1]" {
		t.Fatalf("the parked pop got %+v, want the emit", p)
	}
	t.Logf("parked pop returned %v after the cycle was sent", time.Since(start))
}

// The broker announces a cycle after its commit (hotlist.Announcer): every
// replica's LISTEN must hear of the sink emits and of the released source
// that has data left, and of nothing a refused cycle did.
func TestCycleAnnouncesItsSinkEmitsAndReleasedSourceOnTheLogChannel(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn := pgtest.Listen(t, f.b.DatabaseURL, hotlist.Channel)
	// The channel is the database's: of the announcements, the test's are
	// those of its queues ("<queue id>:<partition id>"), the refused
	// cycle's sink among them should it exist.
	refusedOut := f.b.Q("refused-out")
	ours := func(payload string) bool {
		for _, q := range []string{f.src, f.out, refusedOut} {
			if s := f.b.Stored(t, q); s.Exists && strings.HasPrefix(payload, s.ID+":") {
				return true
			}
		}
		return false
	}
	announced := func() string {
		t.Helper()
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				t.Fatalf("waiting for an announcement: %v", err)
			}
			if ours(n.Payload) {
				return n.Payload
			}
		}
	}
	f.b.PushN(t, f.src, "", 0, 4)
	if got, want := announced(), f.b.Announcement(t, f.src, "Default"); got != want {
		t.Fatalf("the push announced %s, want %s", got, want)
	}
	p := pop(t, f.b, f.src, 2, "")

	refused := cycle(t, f.b, f.body(map[string]any{
		"push_items": []any{map[string]any{"queue": refusedOut, "payload": 0}},
		"ack":        ack(uuid.NewString(), "completed", 2),
	}))
	if refused.Success {
		t.Fatal("a cycle under another lease committed")
	}
	committed(t, f.b, f.body(map[string]any{
		"push_items": []any{map[string]any{"queue": f.out, "payload": 1}},
		"ack":        ack(p.LeaseID, "completed", 2),
	}))
	want := map[string]string{f.b.Announcement(t, f.out, "Default"): "the sink emit", f.b.Announcement(t, f.src, "Default"): "the released source"}
	for len(want) > 0 {
		got := announced()
		if _, ok := want[got]; !ok {
			t.Fatalf("announced %s, which the committed cycle did not touch; still waiting for %v", got, want)
		}
		delete(want, got)
	}
}

func TestCycleCountsItsPushesAndAcksInThePerQueueMetrics(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 5)
	p := pop(t, f.b, f.src, 5, "")
	committed(t, f.b, f.body(map[string]any{
		"push_items": []any{map[string]any{"queue": f.out, "payload": 1}, map[string]any{"queue": f.out, "payload": 2}},
		"ack":        ack(p.LeaseID, "completed", 5),
	}))
	m := f.b.Scrape(t)
	for _, want := range []string{
		fmt.Sprintf(`regent_messages_pushed_total{queue=%q,tenant=%q} 2`, f.out, f.b.Tenant),
		fmt.Sprintf(`regent_messages_acked_total{queue=%q,tenant=%q} 5`, f.src, f.b.Tenant),
	} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %s", want)
		}
	}
}

// Only a refusal that Regent's SQL raises (P0001) is a cycle's success:
// false; any other database error, such as a function that a bad rollout
// broke, is the broker's fault: a 500 that carries no SQL text. It breaks
// the function for every query, so it keeps a broker of its own.
func TestCycleADatabaseErrorThatIsNotARefusalIs500WithoutItsText(t *testing.T) {
	t.Parallel()
	f := fixtureOn(t, start(t))
	if err := f.b.DB.BreakCycles(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := post(t, f.b, "/streams/v1/cycle", f.body(nil))
	wantStatus(t, r, 500)
	if strings.Contains(string(r.Body), "division") || strings.Contains(string(r.Body), "cycle_owner") {
		t.Fatalf("the 500 leaks the database's text: %s", r.Body)
	}
}
