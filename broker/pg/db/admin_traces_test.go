package db_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/pg/db"
)

// trace records a trace of the tenant's message with the names, and
// requires that it found the message.
func (f *fixture) trace(tenant string, partition uuid.UUID, txid string, names ...string) uuid.UUID {
	f.t.Helper()
	id := uuid.New()
	ok, err := f.db.AddTrace(f.ctx, tenant, db.NewTrace{ID: id, PartitionID: partition, TransactionID: txid,
		ConsumerGroup: catalog.QueueMode, EventType: "info", Data: json.RawMessage(`{"step":1}`), Names: names, Worker: "w"})
	require.NoError(f.t, err)
	require.True(f.t, ok, "trace of %s", txid)
	return id
}

func TestAddTraceRecordsAgainstTheMessageAtItsOffsetOnlyWhenTheTenantHasIt(t *testing.T) {
	f := newFixture(t)
	p := f.partition(f.queue("acme", "orders"), "p")
	f.segments(p, "a b", "c")
	f.cursor(p, catalog.QueueMode, 2)
	f.lease(p, catalog.QueueMode, 3, time.Now().Add(time.Minute), 0)

	for txid, want := range map[string]int64{"b": 1, "c": 2} { // outside and inside the group's batch
		id := f.trace("acme", p, txid, "n")
		var off int64
		f.scan(`SELECT message_offset FROM queen.traces WHERE id = $1`, []any{id}, &off)
		require.Equal(t, want, off, txid)
	}
	for _, c := range []struct {
		tenant, txid string
	}{{"other", "a"}, {"acme", "missing"}} {
		ok, err := f.db.AddTrace(f.ctx, c.tenant, db.NewTrace{ID: uuid.New(), PartitionID: p, TransactionID: c.txid,
			ConsumerGroup: catalog.QueueMode, EventType: "info", Data: json.RawMessage(`{}`), Names: []string{"n"}, Worker: "w"})
		require.NoError(t, err)
		require.False(t, ok, "%+v", c)
	}
	var traces, names int
	f.scan(`SELECT (SELECT count(*) FROM queen.traces), (SELECT count(*) FROM queen.trace_names)`, nil, &traces, &names)
	require.Equal(t, []int{2, 2}, []int{traces, names}, "a trace of no message records nothing")
}

func TestMessageTracesAreTheTenantsTracesOfTheMessageOldestFirst(t *testing.T) {
	f := newFixture(t)
	p := f.partition(f.queue("acme", "orders"), "p")
	f.segments(p, "a b")
	first := f.trace("acme", p, "a", "z", "y")
	second := f.trace("acme", p, "a")
	f.trace("acme", p, "b", "z")

	ts, err := f.db.MessageTraces(f.ctx, "acme", p, "a")
	require.NoError(t, err)
	require.Len(t, ts, 2)
	require.ElementsMatch(t, []uuid.UUID{first, second}, []uuid.UUID{ts[0].ID, ts[1].ID})
	for _, tr := range ts {
		if tr.ID == first {
			require.Equal(t, []string{"y", "z"}, tr.Names, "sorted")
		} else {
			require.Empty(t, tr.Names)
		}
		require.JSONEq(t, `{"step":1}`, string(tr.Data))
	}
	ts, err = f.db.MessageTraces(f.ctx, "other", p, "a")
	require.NoError(t, err)
	require.Empty(t, ts, "another tenant's message has no traces for it")
}

func TestTracesByNameCarryTheMessagesSegmentWhileItIsStored(t *testing.T) {
	f := newFixture(t)
	q := f.queue("acme", "orders")
	p := f.partition(q, "p")
	f.segments(p, "a", "b c")
	f.trace("acme", p, "a", "order-1")
	f.trace("acme", p, "c", "order-1")
	f.trace("acme", p, "b", "order-2")
	f.exec(`DELETE FROM queen.log_segments WHERE partition_id = $1 AND base_offset = 0`, p) // retention

	ts, total, err := f.db.TracesByName(f.ctx, "acme", "order-1", 10, 0)
	require.NoError(t, err)
	require.EqualValues(t, 2, total)
	require.Len(t, ts, 2)
	byTxid := map[string]db.Trace{}
	for _, tr := range ts {
		byTxid[tr.TransactionID] = tr
		require.Equal(t, "orders", tr.Queue)
		require.Equal(t, "p", tr.Partition)
	}
	require.Nil(t, byTxid["a"].Base, "its segment is gone")
	c := byTxid["c"]
	require.EqualValues(t, 2, c.Offset)
	require.EqualValues(t, 1, *c.Base)
	require.EqualValues(t, 2, *c.Count)
	require.EqualValues(t, 7, *c.Checksum)

	ts, total, err = f.db.TracesByName(f.ctx, "acme", "order-1", 1, 5)
	require.NoError(t, err)
	require.EqualValues(t, 2, total, "a page past the end still counts")
	require.Empty(t, ts)
	_, total, err = f.db.TracesByName(f.ctx, "other", "order-1", 10, 0)
	require.NoError(t, err)
	require.Zero(t, total)
}

func TestTraceNamesAreMostRecentlySeenFirstAndCountedPastTheLastPage(t *testing.T) {
	f := newFixture(t)
	p := f.partition(f.queue("acme", "orders"), "p")
	f.segments(p, "a b")
	old := f.trace("acme", p, "a", "old")
	f.trace("acme", p, "b", "new")
	f.trace("acme", p, "a", "new")
	f.exec(`UPDATE queen.traces SET created_at = now() - interval '1 hour' WHERE id = $1`, old)

	ns, total, err := f.db.TraceNames(f.ctx, "acme", 10, 0)
	require.NoError(t, err)
	require.EqualValues(t, 2, total)
	require.Len(t, ns, 2)
	require.Equal(t, "new", ns[0].Name)
	require.Equal(t, []int64{2, 2}, []int64{ns[0].Traces, ns[0].Messages})
	require.Equal(t, "old", ns[1].Name)

	ns, total, err = f.db.TraceNames(f.ctx, "acme", 10, 7)
	require.NoError(t, err)
	require.Empty(t, ns)
	require.EqualValues(t, 2, total)
	_, total, err = f.db.TraceNames(f.ctx, "other", 10, 0)
	require.NoError(t, err)
	require.Zero(t, total)
}
