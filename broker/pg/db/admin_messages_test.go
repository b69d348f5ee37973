package db_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/pg/db"
)

func keys(segs []db.StoredSegment) []string {
	var out []string
	for _, s := range segs {
		out = append(out, s.Partition+"@"+string(rune('0'+s.Base)))
	}
	return out
}

func TestStoredSegmentsAreTheTenantsNewestFirstAndAPageStartsAfterTheKey(t *testing.T) {
	f := newFixture(t)
	q := f.queue("acme", "orders")
	a, b := f.partition(q, "a"), f.partition(q, "b")
	f.push(a, t0, "1")
	f.push(b, t0.Add(time.Minute), "2", "3")
	f.push(a, t0.Add(2*time.Minute), "4")
	f.push(b, t0.Add(3*time.Minute), "5")
	f.push(f.partition(f.queue("other", "orders"), "a"), t0.Add(time.Minute), "x")
	all := db.SegmentFilter{From: t0, To: t0.Add(time.Hour)}
	lo, hi := t0, t0.Add(time.Hour)

	page, err := f.db.StoredSegments(f.ctx, "acme", all, lo, hi, nil, 3)
	require.NoError(t, err)
	require.Equal(t, []string{"b@2", "a@1", "b@0"}, keys(page))
	require.Equal(t, "orders", page[0].Queue)
	require.Equal(t, 1, page[0].Frames)
	key := page[2].Key()
	page, err = f.db.StoredSegments(f.ctx, "acme", all, lo, hi, &key, 3)
	require.NoError(t, err)
	require.Equal(t, []string{"a@0"}, keys(page))

	// The slice [lo, hi) is on the newest frame; To cuts on the oldest.
	page, err = f.db.StoredSegments(f.ctx, "acme", all, t0.Add(time.Minute), t0.Add(3*time.Minute), nil, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"a@1", "b@0"}, keys(page))
	page, err = f.db.StoredSegments(f.ctx, "acme", db.SegmentFilter{From: t0, To: t0.Add(time.Minute)}, lo, hi, nil, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"a@0"}, keys(page))
}

func TestStoredSegmentsNarrowByQueuePartitionNamespaceAndTask(t *testing.T) {
	f := newFixture(t)
	orders, invoices := f.queue("acme", "orders"), f.queue("acme", "invoices")
	f.exec(`UPDATE queen.queues SET namespace = 'billing', task = 'send' WHERE id = $1`, invoices)
	f.push(f.partition(orders, "a"), t0, "1")
	f.push(f.partition(orders, "b"), t0, "2")
	f.push(f.partition(invoices, "a"), t0, "3")
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		w    db.SegmentFilter
		want []string
	}{
		{db.SegmentFilter{Queue: s("orders")}, []string{"orders/a", "orders/b"}},
		{db.SegmentFilter{Queue: s("orders"), Partition: s("b")}, []string{"orders/b"}},
		{db.SegmentFilter{Partition: s("a")}, []string{"invoices/a", "orders/a"}},
		{db.SegmentFilter{Namespace: s("billing")}, []string{"invoices/a"}},
		{db.SegmentFilter{Task: s("send")}, []string{"invoices/a"}},
		{db.SegmentFilter{Namespace: s("")}, []string{"orders/a", "orders/b"}},
	} {
		c.w.From, c.w.To = t0, t0.Add(time.Hour)
		page, err := f.db.StoredSegments(f.ctx, "acme", c.w, t0, t0.Add(time.Hour), nil, 10)
		require.NoError(t, err)
		var got []string
		for _, g := range page {
			got = append(got, g.Queue+"/"+g.Partition)
		}
		require.ElementsMatch(t, c.want, got, "%+v", c.w)
	}
}

func TestFindMessageFindsTheNewestFrameOfTheTransactionIdAboveTheFloor(t *testing.T) {
	f := newFixture(t)
	q := f.queue("acme", "orders")
	p := f.partition(q, "p")
	f.segments(p, "a b", "c a d")

	m, err := f.db.FindMessage(f.ctx, "acme", p, "a")
	require.NoError(t, err)
	require.EqualValues(t, 2, m.Base, "the newest segment that holds it")
	require.Equal(t, 1, m.Index)
	require.Equal(t, "orders", m.Queue)
	require.Equal(t, 300, m.LeaseTime)

	m, err = f.db.FindMessage(f.ctx, "acme", p, "b")
	require.NoError(t, err)
	require.Equal(t, 1, m.Index)
	f.exec(`UPDATE queen.partitions SET floor_offset = 2 WHERE id = $1`, p)
	m, err = f.db.FindMessage(f.ctx, "acme", p, "b")
	require.NoError(t, err)
	require.Nil(t, m, "below the floor a message is deleted")

	for _, c := range []struct {
		tenant, txid string
		partition    uuid.UUID
	}{{"other", "c", p}, {"acme", "missing", p}, {"acme", "c", uuid.New()}} {
		m, err := f.db.FindMessage(f.ctx, c.tenant, c.partition, c.txid)
		require.NoError(t, err)
		require.Nil(t, m, "%+v", c)
	}
}

func TestDeleteMessageRewritesTheSegmentOnlyAsItWasReadAndTakesTheMessagesTraces(t *testing.T) {
	f := newFixture(t)
	p := f.partition(f.queue("acme", "orders"), "p")
	f.segments(p, "a b")
	m, err := f.db.FindMessage(f.ctx, "acme", p, "b")
	require.NoError(t, err)
	id := f.deadLetter(p, "g", "b", "boom", t0)
	f.exec(`INSERT INTO queen.push_dedup (partition_id, transaction_id, message_id) VALUES ($1, 'b', $2)`, p, id)
	f.exec(`INSERT INTO queen.traces (id, partition_id, transaction_id, message_offset, consumer_group, event_type, data, worker_id)
		VALUES ($1, $2, 'b', 1, 'g', 'info', '{}', 'w')`, uuid.New(), p)
	rewrite := db.SegmentRewrite{Body: []byte{1, 2}, Checksum: 99, MessageID: id}

	stale := *m
	stale.Checksum++
	done, err := f.db.DeleteMessage(f.ctx, &stale, "b", rewrite)
	require.NoError(t, err)
	require.False(t, done, "a segment changed since it was read is left alone")

	done, err = f.db.DeleteMessage(f.ctx, m, "b", rewrite)
	require.NoError(t, err)
	require.True(t, done)
	var txids []string
	var checksum int64
	var rest int
	f.scan(`SELECT txids, checksum, (SELECT count(*) FROM queen.dead_letters) + (SELECT count(*) FROM queen.push_dedup)
			+ (SELECT count(*) FROM queen.traces)
		  FROM queen.log_segments WHERE partition_id = $1`, []any{p}, &txids, &checksum, &rest)
	require.Equal(t, []string{"a", ""}, txids, "the id is free for a later push")
	require.EqualValues(t, 99, checksum)
	require.Zero(t, rest, "its dead letter, dedup entry and traces go with it")

	done, err = f.db.DeleteMessage(f.ctx, m, "b", rewrite)
	require.NoError(t, err)
	require.False(t, done, "a second deletion finds the segment changed")
}

func TestCursorStatesAndDeadLetteredDescribeTheMessagesPartitions(t *testing.T) {
	f := newFixture(t)
	q := f.queue("acme", "orders")
	a, b := f.partition(q, "a"), f.partition(q, "b")
	f.cursor(a, catalog.QueueMode, 2)
	f.lease(a, catalog.QueueMode, 4, time.Now().Add(time.Hour), 0)
	f.cursor(a, "g", 1)
	f.cursor(b, "g", 0)
	f.lease(b, "g", 1, time.Now().Add(-time.Hour), 0)

	states, err := f.db.CursorStates(f.ctx, []uuid.UUID{a, b})
	require.NoError(t, err)
	require.Len(t, states[a], 2)
	require.Equal(t, catalog.QueueMode, states[a][0].Group)
	require.True(t, states[a][0].LeaseLive)
	require.Equal(t, []int64{2, 4}, []int64{*states[a][0].BatchStart, *states[a][0].BatchEnd})
	require.Equal(t, "g", states[a][1].Group)
	require.Nil(t, states[a][1].BatchEnd)
	require.False(t, states[b][0].LeaseLive, "an expired lease is no lease")

	id := uuid.New()
	f.exec(`INSERT INTO queen.dead_letters (message_id, partition_id, consumer_group, transaction_id, error_message,
			retry_count, created_at, failed_at)
		VALUES ($1, $2, 'g1', 'x', 'first', 1, $3, $3), ($1, $2, 'g2', 'x', 'latest', 2, $3, $4)`,
		id, a, t0, t0.Add(time.Minute))
	other := f.deadLetter(b, "g", "y", "", t0)
	dead, err := f.db.DeadLettered(f.ctx, []uuid.UUID{a}, []uuid.UUID{id, other})
	require.NoError(t, err)
	require.Len(t, dead, 1, "only the partitions asked for")
	require.Equal(t, "latest", *dead[id].ErrorMessage, "when several groups dead-lettered it, the latest")
	require.Equal(t, 2, dead[id].RetryCount)
}

func TestConsumptionModesTellTheQueueModeCursorFromTheNamedGroups(t *testing.T) {
	f := newFixture(t)
	orders, invoices := f.queue("acme", "orders"), f.queue("acme", "invoices")
	f.cursor(f.partition(orders, "a"), catalog.QueueMode, 0)
	f.cursor(f.partition(invoices, "a"), "g1", 0)
	ib := f.partition(invoices, "b")
	f.cursor(ib, "g1", 0)
	f.cursor(ib, "g2", 0)
	f.cursor(f.partition(f.queue("other", "x"), "a"), "g3", 0)

	qm, groups, err := f.db.ConsumptionModes(f.ctx, "acme", nil)
	require.NoError(t, err)
	require.True(t, qm)
	require.Equal(t, 2, groups, "another tenant's groups do not count")
	name := "invoices"
	qm, groups, err = f.db.ConsumptionModes(f.ctx, "acme", &name)
	require.NoError(t, err)
	require.False(t, qm)
	require.Equal(t, 2, groups)
}
