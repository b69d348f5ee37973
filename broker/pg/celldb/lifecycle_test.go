package celldb_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/test/brokertest"
)

// pushTo pushes n messages {"n": from+i} to src's partition Default in one
// request, so in one segment.
func pushTo(t *testing.T, b *brokertest.Broker, from, n int) {
	t.Helper()
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{"queue": "src", "payload": map[string]any{"n": from + i}}
	}
	if r := b.Do(t, "POST", "/api/v1/push", brokertest.Mint(t, auth.DefaultTenant, auth.ReadWrite), map[string]any{"items": items}); r.Status != http.StatusCreated {
		t.Fatalf("push: %d %s", r.Status, r.Body)
	}
}

// consumeAll pops src for the query's group with auto-ack until it is
// drained, and returns how many messages it got.
func consumeAll(t *testing.T, b *brokertest.Broker) int {
	t.Helper()
	n := 0
	for range 100 {
		r := b.Do(t, "GET", "/api/v1/pop/queue/src/partition/Default?batch=100&autoAck=true&consumerGroup=streams.q",
			brokertest.Mint(t, auth.DefaultTenant, auth.ReadWrite), nil)
		if r.Status == http.StatusNoContent {
			return n
		}
		if r.Status != http.StatusOK {
			t.Fatalf("pop: %d %s", r.Status, r.Body)
		}
		n += len(r.Map(t)["messages"].([]any))
	}
	t.Fatal("src never drained")
	return n
}

func committedOffset(t *testing.T, b *brokertest.Broker) int64 {
	t.Helper()
	var c int64
	if err := b.Pool.QueryRow(ctx, `SELECT committed FROM queen.cursors WHERE consumer_group = 'streams.q'`).Scan(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

func stateRows(t *testing.T, b *brokertest.Broker, id string) int {
	t.Helper()
	return b.Count(t, `SELECT count(*) FROM queen_streams.state WHERE query_id = $1`, id)
}

// twoBatches pushes messages 0-4, then, a minute later by the messages'
// creation times, 5-9, and consumes them all as the query's group. It
// returns an instant between the batches: a rewind goes by creation times,
// so the first batch is aged rather than waited for.
func twoBatches(t *testing.T, b *brokertest.Broker) time.Time {
	t.Helper()
	pushTo(t, b, 0, 5)
	if err := b.DB.Age(ctx, auth.DefaultTenant, "src", time.Minute); err != nil {
		t.Fatal(err)
	}
	now, err := b.DB.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pushTo(t, b, 5, 5)
	if n := consumeAll(t, b); n != 10 {
		t.Fatalf("consumed %d, want 10", n)
	}
	return now.Add(-30 * time.Second)
}

func TestARewindDeletesTheStateAndMovesTheGroupToTheFirstMessageAtOrAfterItsTime(t *testing.T) {
	b, cell, id := setup(t)
	between := twoBatches(t, b)
	execSQL(t, b, `INSERT INTO queen_streams.state (query_id, partition_id, key, value) VALUES ($1, gen_random_uuid(), 'k', '{}')`, id)

	rw, err := cell.Rewind(ctx, auth.DefaultTenant, "q", "streams.q", "t1", between)
	if err != nil {
		t.Fatal(err)
	}
	if rw.Already || rw.Partitions != 1 || rw.StateRows != 1 || time.Since(rw.At) > time.Minute {
		t.Fatalf("rewind %+v, want one partition moved and one state row deleted, just now", rw)
	}
	if c := committedOffset(t, b); c != 5 {
		t.Fatalf("cursor at %d after a rewind to between the batches, want 5", c)
	}
	if n := stateRows(t, b, id); n != 0 {
		t.Fatalf("%d state rows survived the rewind", n)
	}
	if n := consumeAll(t, b); n != 5 {
		t.Fatalf("redelivered %d messages, want the 5 of the second batch", n)
	}

	// A time before every message moves the group to the start.
	if _, err := cell.Rewind(ctx, auth.DefaultTenant, "q", "streams.q", "t0", between.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if c := committedOffset(t, b); c != 0 {
		t.Fatalf("cursor at %d after a rewind to before every message, want 0", c)
	}
}

func TestARewindHappensOncePerToken(t *testing.T) {
	b, cell, id := setup(t)
	between := twoBatches(t, b)
	first, err := cell.Rewind(ctx, auth.DefaultTenant, "q", "streams.q", "t1", between)
	if err != nil {
		t.Fatal(err)
	}
	// The worker carries on: it re-folds and writes state again.
	consumeAll(t, b)
	execSQL(t, b, `INSERT INTO queen_streams.state (query_id, partition_id, key, value) VALUES ($1, gen_random_uuid(), 'k', '{}')`, id)

	again, err := cell.Rewind(ctx, auth.DefaultTenant, "q", "streams.q", "t1", between)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Already || !again.At.Equal(first.At) || again.Partitions != first.Partitions {
		t.Fatalf("the same token again answered %+v, want the first rewind %+v, already done", again, first)
	}
	if c, n := committedOffset(t, b), stateRows(t, b, id); c != 10 || n != 1 {
		t.Fatalf("cursor %d and %d state rows after a repeated token, want 10 and 1: it rewound again", c, n)
	}

	if next, err := cell.Rewind(ctx, auth.DefaultTenant, "q", "streams.q", "t2", between); err != nil || next.Already {
		t.Fatalf("a new token = %+v, %v; want a rewind", next, err)
	}
	if c := committedOffset(t, b); c != 5 {
		t.Fatalf("cursor at %d after a new token, want 5", c)
	}
}

func TestRewindOfAnUnknownQueryIsErrNoQuery(t *testing.T) {
	_, cell, _ := setup(t)
	for _, tenant := range []string{auth.DefaultTenant, "other"} {
		name := map[string]string{auth.DefaultTenant: "absent", "other": "q"}[tenant]
		if _, err := cell.Rewind(ctx, tenant, name, "streams."+name, "t", time.Now()); !errors.Is(err, celldb.ErrNoQuery) {
			t.Fatalf("rewind of %s/%s: %v, want ErrNoQuery", tenant, name, err)
		}
	}
}

func TestSuspendReportsWhetherTheQueryExists(t *testing.T) {
	b, cell, _ := setup(t)
	for _, suspended := range []bool{true, true, false} {
		found, err := cell.Suspend(ctx, auth.DefaultTenant, "q", "streams.q", suspended)
		if err != nil || !found {
			t.Fatalf("suspend(%t) = %v, %v; want found", suspended, found, err)
		}
		if n := b.Count(t, `SELECT count(*) FROM queen_streams.queries WHERE name = 'q' AND suspended = $1`, suspended); n != 1 {
			t.Fatalf("the query's suspended flag is not %t", suspended)
		}
	}
	if found, err := cell.Suspend(ctx, "other", "q", "streams.q", true); err != nil || found {
		t.Fatalf("suspend of another tenant's name = %v, %v; want not found", found, err)
	}
}

func TestProgressReportsTheOldestUnconsumedMessage(t *testing.T) {
	b, cell, _ := setup(t)
	p, err := cell.Progress(ctx, auth.DefaultTenant, "q", "streams.q", "src")
	if err != nil || p.Oldest != nil {
		t.Fatalf("progress %+v, %v; want no oldest without messages", p, err)
	}
	between := twoBatches(t, b)
	if _, err := cell.Rewind(ctx, auth.DefaultTenant, "q", "streams.q", "t1", between); err != nil {
		t.Fatal(err)
	}
	p, err = cell.Progress(ctx, auth.DefaultTenant, "q", "streams.q", "src")
	if err != nil {
		t.Fatal(err)
	}
	if p.Lag != 5 || p.Oldest == nil || !p.Oldest.After(between) || time.Since(*p.Oldest) > time.Minute {
		t.Fatalf("progress %+v, want lag 5 and the second batch's time, after %s", p, between)
	}
	consumeAll(t, b)
	if p, err = cell.Progress(ctx, auth.DefaultTenant, "q", "streams.q", "src"); err != nil || p.Oldest != nil || p.Lag != 0 {
		t.Fatalf("progress %+v, %v after consuming everything, want no lag and no oldest", p, err)
	}
}
