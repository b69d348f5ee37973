package produce

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

// newProducer is a producer on a fresh database, and the database as the
// test arranges and inspects it.
func newProducer(t *testing.T) (*Producer, *dbtest.DB) {
	t.Helper()
	pool := pgtest.New(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	d := db.New(pool)
	return New(d, catalog.New(d, config.DefaultCatalogSize), Options{Metrics: metrics.New(), Logger: logger}), dbtest.New(pool)
}

// stored is what queue q of the default tenant holds.
func stored(t *testing.T, d *dbtest.DB, queue string) dbtest.Queue {
	t.Helper()
	q, err := d.Queue(t.Context(), "default", queue)
	require.NoError(t, err)
	return q
}

func TestAPushOfSeveralPartitionsStoresAllOrNone(t *testing.T) {
	t.Parallel()
	l, d := newProducer(t)
	ctx := context.Background()
	p, err := l.Pack(ctx, "default", "", uuid.Nil, []Item{
		{Queue: "q", Partition: "a", Payload: json.RawMessage(`1`)},
		{Queue: "q", Partition: "b", Payload: json.RawMessage(`2`)},
	})
	require.NoError(t, err)
	require.Len(t, p.Segments, 2)
	// One segment's partition disappears: the other must not be stored.
	require.NoError(t, d.DeletePartition(ctx, "default", "q", p.Segments[1].Partition.Name))
	_, err = l.allocate(ctx, nil, p)
	require.ErrorIs(t, err, catalog.ErrPartitionGone)
	require.Zero(t, stored(t, d, "q").Segments, "queen.log_push_one_v1 writes nothing when a partition is gone")
	// Whichever partition it moved before it met the gone one, it moved back.
	parts, err := d.Partitions(ctx, "default", "q")
	require.NoError(t, err)
	require.Len(t, parts, 1)
	require.Equal(t, p.Segments[0].Partition.ID.String(), parts[0].ID)
	require.Zero(t, parts[0].NextOffset)
	require.Nil(t, parts[0].LastPushAt)
}

// vanished returns a producer whose catalog caches queue q's Default
// partition, which another replica has deleted since.
func vanished(t *testing.T) (*Producer, *dbtest.DB, *catalog.Partition) {
	t.Helper()
	l, d := newProducer(t)
	first, err := l.catalog.Resolve(t.Context(), catalog.Target{Tenant: "default", Queue: "q", Partition: "Default"})
	require.NoError(t, err)
	require.NoError(t, d.DeleteQueue(t.Context(), "default", "q"))
	return l, d, first
}

func TestPushRecoversWhenACachedPartitionVanished(t *testing.T) {
	t.Parallel()
	l, _, first := vanished(t)
	e, err := l.Emit(t.Context(), Write{Tenant: "default", Items: []Item{{Queue: "q", Payload: json.RawMessage(`1`)}}})
	require.NoError(t, err)
	require.NotEqual(t, first.ID, e.Pushed[0].Partition.ID)
}

// In the caller's transaction a push cannot run again: a partition deleted
// behind the cache is the caller's error, and the transaction stores nothing.
func TestAPushInATransactionReturnsAGonePartition(t *testing.T) {
	t.Parallel()
	l, d, _ := vanished(t)
	ctx := t.Context()
	err := l.db.InTx(ctx, func(tx *db.DB) error {
		_, err := l.Emit(ctx, Write{Tenant: "default", Items: []Item{{Queue: "q", Payload: json.RawMessage(`1`)}}, Tx: tx})
		return err
	})
	require.ErrorIs(t, err, catalog.ErrPartitionGone)
	require.False(t, stored(t, d, "q").Exists, "the push in the transaction resolved nothing again")
}

// joinedPushes packs requests of items and runs them as one joined batch,
// as the joiner does with the requests that waited for a call.
func joinedPushes(t *testing.T, l *Producer, requests ...[]Item) []*pushCall {
	t.Helper()
	calls := make([]*pushCall, len(requests))
	for i, items := range requests {
		p, err := l.Pack(context.Background(), "default", "", uuid.Nil, items)
		require.NoError(t, err)
		calls[i] = &pushCall{p: p}
	}
	l.joinPushes(context.Background(), calls)
	return calls
}

func TestJoinedPushesToOnePartitionTakeOffsetsInRequestOrder(t *testing.T) {
	t.Parallel()
	l, d := newProducer(t)
	calls := joinedPushes(t, l,
		[]Item{{Queue: "q", Payload: json.RawMessage(`1`)}, {Queue: "q", Payload: json.RawMessage(`2`)}},
		[]Item{{Queue: "q", Payload: json.RawMessage(`3`)}},
		[]Item{{Queue: "q", Partition: "other", Payload: json.RawMessage(`4`)}},
		[]Item{{Queue: "q", Payload: json.RawMessage(`5`), TransactionID: "t5"}})
	var bases []int64
	for _, c := range calls {
		require.NoError(t, c.err)
		require.Len(t, c.segs, 1)
		bases = append(bases, c.segs[0].BaseOffset)
	}
	require.Equal(t, []int64{0, 2, 0, 3}, bases)
	require.Equal(t, 4, stored(t, d, "q").Segments)
}

func TestAJoinedPushThatRepeatsAnotherOfItsBatchIsItsDuplicate(t *testing.T) {
	t.Parallel()
	l, _ := newProducer(t)
	calls := joinedPushes(t, l,
		[]Item{{Queue: "q", Payload: json.RawMessage(`1`), TransactionID: "a"}},
		[]Item{{Queue: "q", Payload: json.RawMessage(`2`), TransactionID: "b"},
			{Queue: "q", Payload: json.RawMessage(`3`), TransactionID: "a"}},
		// The same id in another partition is another message.
		[]Item{{Queue: "q", Partition: "other", Payload: json.RawMessage(`4`), TransactionID: "a"}})
	for _, c := range calls {
		require.NoError(t, c.err)
	}
	first := calls[0].p.Results(calls[0].segs)
	second := calls[1].p.Results(calls[1].segs)
	other := calls[2].p.Results(calls[2].segs)
	require.False(t, first[0].Duplicate)
	require.False(t, second[0].Duplicate)
	require.True(t, second[1].Duplicate, "a repeated transactionId in a partition answers duplicate")
	require.Equal(t, first[0].MessageID, second[1].MessageID)
	require.False(t, other[0].Duplicate)
}

func TestAJoinedPushToAGonePartitionFailsAlone(t *testing.T) {
	t.Parallel()
	l, d := newProducer(t)
	ctx := context.Background()
	gone, err := l.Pack(ctx, "default", "", uuid.Nil, []Item{{Queue: "gone", Payload: json.RawMessage(`1`)}})
	require.NoError(t, err)
	kept, err := l.Pack(ctx, "default", "", uuid.Nil, []Item{{Queue: "kept", Payload: json.RawMessage(`2`)}})
	require.NoError(t, err)
	require.NoError(t, d.DeleteQueue(ctx, "default", "gone"))
	calls := []*pushCall{{p: gone}, {p: kept}}
	l.joinPushes(ctx, calls)
	require.ErrorIs(t, calls[0].err, catalog.ErrPartitionGone)
	require.NoError(t, calls[1].err)
	require.Len(t, calls[1].segs, 1)
}

func TestJoinedPushesDropWhatTheDatabaseHoldsPerRequest(t *testing.T) {
	t.Parallel()
	l, d := newProducer(t)
	ctx := context.Background()
	held, err := l.Emit(ctx, Write{Tenant: "default", Items: []Item{{Queue: "q", Payload: json.RawMessage(`0`), TransactionID: "held"}}})
	require.NoError(t, err)
	before := held.Pushed
	calls := joinedPushes(t, l,
		[]Item{{Queue: "q", Payload: json.RawMessage(`1`), TransactionID: "new"}},
		[]Item{{Queue: "q", Payload: json.RawMessage(`2`), TransactionID: "held"},
			{Queue: "q", Payload: json.RawMessage(`3`), TransactionID: "also new"}})
	for _, c := range calls {
		require.NoError(t, c.err)
	}
	fresh := calls[0].p.Results(calls[0].segs)
	mixed := calls[1].p.Results(calls[1].segs)
	require.False(t, fresh[0].Duplicate)
	require.True(t, mixed[0].Duplicate)
	require.Equal(t, before[0].MessageID, mixed[0].MessageID)
	require.False(t, mixed[1].Duplicate)
	require.Equal(t, 3, stored(t, d, "q").Frames)
}
