package db_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/pg/db"
)

// deadLetter records a dead letter of the group for a message of the
// partition.
func (f *fixture) deadLetter(partition uuid.UUID, group, txid, errorMessage string, failed time.Time) uuid.UUID {
	f.t.Helper()
	id := uuid.New()
	f.exec(`INSERT INTO queen.dead_letters (message_id, partition_id, consumer_group, transaction_id, error_message,
			retry_count, created_at, failed_at)
		VALUES ($1, $2, $3, $4, $5, 3, $6, $6)`, id, partition, group, txid, errorMessage, failed)
	return id
}

// counted lays down a queue of two partitions whose counts §3 fixes:
//
//	a: offsets 0-9 given, 0-1 deleted by retention; group g1 at 5, group
//	   g2 at 7 with a live lease of [7, 9); one dead letter.
//	b: offsets 0-2 given, below 1 evicted (the floor); no cursor.
func counted(f *fixture) (q, a, b uuid.UUID) {
	q = f.queue("acme", "orders")
	a, b = f.partition(q, "a"), f.partition(q, "b")
	f.segments(a, "0 1", "2 3 4", "5 6 7 8 9")
	f.exec(`DELETE FROM queen.log_segments WHERE partition_id = $1 AND base_offset = 0`, a)
	f.cursor(a, "g1", 5)
	f.cursor(a, "g2", 7)
	f.lease(a, "g2", 9, time.Now().Add(time.Hour), 0)
	f.exec(`UPDATE queen.cursors SET total_consumed = 4 WHERE consumer_group = 'g1'`)
	f.deadLetter(a, "g1", "3", "boom", t0)
	f.push(b, t0.Add(3*time.Minute), "x", "y", "z")
	f.exec(`UPDATE queen.partitions SET floor_offset = 1 WHERE id = $1`, b)
	return q, a, b
}

func TestMessageCountsComeFromOffsetsAndTheGroupFurthestBehind(t *testing.T) {
	f := newFixture(t)
	q, a, b := counted(f)

	got, parts, err := f.db.QueueDetail(f.ctx, "acme", "orders")
	require.NoError(t, err)
	require.Equal(t, q, got.ID)
	require.Len(t, parts, 2)
	require.Equal(t, a, parts[0].ID)
	// Stored: 10 given less the 2 retention deleted. Pending: the group
	// furthest behind (g1, 5 of them); processing: g2's live batch.
	require.Equal(t, db.MessageCounts{Total: 8, Pending: 5, Waiting: 5, Processing: 2, DeadLetter: 1}, parts[0].Counts)
	require.EqualValues(t, 2, parts[0].Counts.Completed())
	require.EqualValues(t, 4, parts[0].Consumed)
	require.True(t, parts[0].OldestPending.Equal(t0.Add(2*time.Minute)), "the segment holding g1's offset 5, %s", parts[0].OldestPending)
	require.True(t, parts[0].Newest.Equal(t0.Add(2*time.Minute)))

	require.Equal(t, b, parts[1].ID)
	require.Equal(t, db.MessageCounts{Total: 2, Pending: 2, Waiting: 2}, parts[1].Counts,
		"no cursor: one queue-mode group at the beginning, which is the floor")

	require.Equal(t, 2, got.Partitions)
	require.Equal(t, db.MessageCounts{Total: 10, Pending: 7, Waiting: 7, Processing: 2, DeadLetter: 1}, got.Counts)
}

func TestQueueSummariesAreTheTenantsQueuesNewestFirstWithTheirPartitionsSummed(t *testing.T) {
	f := newFixture(t)
	q, _, _ := counted(f)
	empty := f.queue("acme", "empty")
	f.exec(`UPDATE queen.queues SET created_at = now() + interval '1 minute', namespace = 'ns' WHERE id = $1`, empty)
	f.queue("other", "foreign")

	qs, err := f.db.QueueSummaries(f.ctx, "acme")
	require.NoError(t, err)
	require.Len(t, qs, 2, "the tenant's queues only")
	require.Equal(t, empty, qs[0].ID)
	require.Equal(t, "ns", qs[0].Namespace)
	require.Zero(t, qs[0].Partitions)
	require.Equal(t, db.MessageCounts{}, qs[0].Counts)
	require.Equal(t, q, qs[1].ID)
	require.EqualValues(t, 13, qs[1].Given, "every offset ever given")
	require.EqualValues(t, 4, qs[1].Consumed)
	require.Equal(t, db.MessageCounts{Total: 10, Pending: 7, Waiting: 7, Processing: 2, DeadLetter: 1}, qs[1].Counts)
	require.Equal(t, 300, qs[1].LeaseTime, "the queue's settings come along")
}

func TestQueueDetailOfAnUnknownOrAnotherTenantsQueueIsNil(t *testing.T) {
	f := newFixture(t)
	f.partition(f.queue("other", "orders"), "p")
	for _, name := range []string{"orders", "missing"} {
		q, parts, err := f.db.QueueDetail(f.ctx, "acme", name)
		require.NoError(t, err)
		require.Nil(t, q)
		require.Nil(t, parts)
	}
}

func TestOverviewSumsTheTenantsPartitions(t *testing.T) {
	f := newFixture(t)
	counted(f)
	other := f.queue("acme", "other")
	f.exec(`UPDATE queen.queues SET namespace = 'ns', task = 't' WHERE id = $1`, other)
	f.queue("foreign", "orders")

	o, err := f.db.Overview(f.ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, db.Overview{Queues: 2, Partitions: 2, Namespaces: 1, Tasks: 1, Given: 13,
		Counts:     db.MessageCounts{Total: 10, Pending: 7, Waiting: 7, Processing: 2, DeadLetter: 1},
		PendingAvg: 3.5, PendingMedian: 3.5, PendingMin: 2, PendingMax: 5}, o)
}

func TestLeaseFiguresCountOnlyLiveLeasesAndTheCommonestErrors(t *testing.T) {
	f := newFixture(t)
	_, _, b := counted(f)
	f.cursor(b, "g", 0)
	f.lease(b, "g", 2, time.Now().Add(-time.Second), 0) // expired
	for i, msg := range []string{"late", "boom", "late"} {
		f.deadLetter(b, "g", string(rune('a'+i)), msg, t0)
	}
	f.deadLetter(f.partition(f.queue("other", "orders"), "p"), "g", "x", "foreign", t0)

	l, err := f.db.LeaseFigures(f.ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, db.LeaseFigures{Active: 1, Partitions: 1, BatchSize: 2, Acked: 0, DeadLetters: 4, DeadPartitions: 2,
		TopErrors: []db.ErrorCount{{Error: "boom", Count: 2}, {Error: "late", Count: 2}}}, l)
}
