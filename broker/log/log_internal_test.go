package log

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/hotlist"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func newLog(t *testing.T) *Log {
	t.Helper()
	return New(pgtest.New(t), nil, metrics.New(), hotlist.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func TestAPushOfSeveralPartitionsStoresAllOrNone(t *testing.T) {
	t.Parallel()
	l := newLog(t)
	ctx := context.Background()
	p, err := l.Pack(ctx, "default", "", []Item{
		{Queue: "q", Partition: "a", Payload: json.RawMessage(`1`)},
		{Queue: "q", Partition: "b", Payload: json.RawMessage(`2`)},
	})
	require.NoError(t, err)
	require.Len(t, p.Segments, 2)
	// One segment's partition disappears: the other must not be stored.
	_, err = l.pool.Exec(ctx, `DELETE FROM queen.partitions WHERE id = $1`, p.Segments[1].Partition.ID)
	require.NoError(t, err)
	_, err = l.store(ctx, l.pool, p)
	require.ErrorIs(t, err, ErrPartitionGone)
	var n int
	require.NoError(t, l.pool.QueryRow(ctx, `SELECT count(*) FROM queen.log_segments`).Scan(&n))
	require.Zero(t, n, "queen.log_push_one_v1 writes nothing when a partition is gone")
	// Whichever partition it moved before it met the gone one, it moved back.
	var offset int64
	var lastPush *time.Time
	require.NoError(t, l.pool.QueryRow(ctx, `SELECT next_offset, last_push_at FROM queen.partitions WHERE id = $1`,
		p.Segments[0].Partition.ID).Scan(&offset, &lastPush))
	require.Zero(t, offset)
	require.Nil(t, lastPush)
}

func TestPushRecoversWhenACachedPartitionVanished(t *testing.T) {
	t.Parallel()
	l := newLog(t)
	ctx := context.Background()
	first, err := l.Resolve(ctx, Target{"default", "q", "Default"})
	require.NoError(t, err)
	_, err = l.pool.Exec(ctx, `DELETE FROM queen.queues`)
	require.NoError(t, err)
	out, _, err := l.Push(ctx, l.pool, "default", "", []Item{{Queue: "q", Payload: json.RawMessage(`1`)}})
	require.NoError(t, err)
	require.NotEqual(t, first.ID, out[0].Partition.ID)
}

func TestResolveCachesAndCreatesOnce(t *testing.T) {
	t.Parallel()
	l := newLog(t)
	ctx := context.Background()
	a, err := l.Resolve(ctx, Target{"default", "q", "p"})
	require.NoError(t, err)
	b, err := l.Resolve(ctx, Target{"default", "q", "p"})
	require.NoError(t, err)
	require.Same(t, a, b)
	c, err := l.Resolve(ctx, Target{"acme", "q", "p"})
	require.NoError(t, err)
	require.NotEqual(t, a.Queue.ID, c.Queue.ID, "queue names are per tenant")
	var bad *BadName
	_, err = l.Resolve(ctx, Target{"default", "no spaces", "p"})
	require.ErrorAs(t, err, &bad)
}

func TestOwnedPartitionIsNotFoundForAnotherTenant(t *testing.T) {
	t.Parallel()
	l := newLog(t)
	ctx := context.Background()
	p, err := l.Resolve(ctx, Target{"acme", "q", "p"})
	require.NoError(t, err)
	got, err := l.OwnedPartition(ctx, "acme", p.ID)
	require.NoError(t, err)
	require.Equal(t, p.ID, got.ID)
	_, err = l.OwnedPartition(ctx, "other", p.ID)
	require.True(t, errors.Is(err, ErrNotFound))
	_, err = l.OwnedPartition(ctx, "acme", uuid.New())
	require.True(t, errors.Is(err, ErrNotFound))
	// Uncached: a second Log reads the database.
	s2 := New(l.pool, nil, metrics.New(), hotlist.New(), l.logger)
	_, err = s2.OwnedPartition(ctx, "other", p.ID)
	require.True(t, errors.Is(err, ErrNotFound))
	got, err = s2.OwnedPartition(ctx, "acme", p.ID)
	require.NoError(t, err)
	require.Equal(t, "p", got.Name)
	require.Equal(t, "q", got.Queue.Name)
}
