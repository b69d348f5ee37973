package queue

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/hotlist"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/segment"
	"github.com/regent-mq/regent/test/pgtest"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	return New(pgtest.New(t), nil, metrics.New(), hotlist.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func TestAPushOfSeveralPartitionsStoresAllOrNone(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	p, err := s.Pack(ctx, "default", "", []Item{
		{Queue: "q", Partition: "a", Payload: json.RawMessage(`1`)},
		{Queue: "q", Partition: "b", Payload: json.RawMessage(`2`)},
	})
	require.NoError(t, err)
	require.Len(t, p.Segments, 2)
	// One segment's partition disappears: the other must not be stored.
	_, err = s.pool.Exec(ctx, `DELETE FROM queen.partitions WHERE id = $1`, p.Segments[1].Partition.ID)
	require.NoError(t, err)
	_, err = s.store(ctx, s.pool, p)
	require.ErrorIs(t, err, ErrPartitionGone)
	var n int
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*) FROM queen.log_segments`).Scan(&n))
	require.Zero(t, n, "queen.log_push writes nothing when a partition is gone")
}

func TestPushRecoversWhenACachedPartitionVanished(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	first, err := s.Resolve(ctx, Target{"default", "q", "Default"})
	require.NoError(t, err)
	_, err = s.pool.Exec(ctx, `DELETE FROM queen.queues`)
	require.NoError(t, err)
	out, _, err := s.Push(ctx, s.pool, "default", "", []Item{{Queue: "q", Payload: json.RawMessage(`1`)}})
	require.NoError(t, err)
	require.NotEqual(t, first.ID, out[0].Partition.ID)
}

func TestResolveCachesAndCreatesOnce(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	a, err := s.Resolve(ctx, Target{"default", "q", "p"})
	require.NoError(t, err)
	b, err := s.Resolve(ctx, Target{"default", "q", "p"})
	require.NoError(t, err)
	require.Same(t, a, b)
	c, err := s.Resolve(ctx, Target{"acme", "q", "p"})
	require.NoError(t, err)
	require.NotEqual(t, a.Queue.ID, c.Queue.ID, "queue names are per tenant")
	var bad *BadName
	_, err = s.Resolve(ctx, Target{"default", "no spaces", "p"})
	require.ErrorAs(t, err, &bad)
}

func TestOwnedPartitionIsNotFoundForAnotherTenant(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	p, err := s.Resolve(ctx, Target{"acme", "q", "p"})
	require.NoError(t, err)
	got, err := s.OwnedPartition(ctx, "acme", p.ID)
	require.NoError(t, err)
	require.Equal(t, p.ID, got.ID)
	_, err = s.OwnedPartition(ctx, "other", p.ID)
	require.True(t, errors.Is(err, ErrNotFound))
	_, err = s.OwnedPartition(ctx, "acme", uuid.New())
	require.True(t, errors.Is(err, ErrNotFound))
	// Uncached: a second store reads the database.
	s2 := New(s.pool, nil, metrics.New(), hotlist.New(), s.log)
	_, err = s2.OwnedPartition(ctx, "other", p.ID)
	require.True(t, errors.Is(err, ErrNotFound))
	got, err = s2.OwnedPartition(ctx, "acme", p.ID)
	require.NoError(t, err)
	require.Equal(t, "p", got.Name)
	require.Equal(t, "q", got.Queue.Name)
}

// A pop that took a lease but cannot answer (here a segment fails its
// checksum) gives the lease back and offers the partition again at once,
// not after the lease expires. No listener runs here: only the pop's own
// announcement can put the partition back on the hot list.
func TestAPopThatCannotAnswerReleasesItsLeaseAndOffersThePartitionAgain(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	items := []Item{{Queue: "q", Payload: json.RawMessage(`1`)}, {Queue: "q", Payload: json.RawMessage(`2`)}}
	_, segs, err := s.Push(ctx, s.pool, "default", "", items)
	require.NoError(t, err)
	s.AfterPush(segs)
	p := &popRequest{tenant: "default", queue: "q", group: QueueMode, batch: 2, partitions: 1, subStart: "all"}

	_, err = s.pool.Exec(ctx, `UPDATE queen.log_segments SET checksum = checksum + 1`)
	require.NoError(t, err)
	_, _, _, _, _, err = s.popOnce(ctx, p)
	require.ErrorIs(t, err, segment.ErrCorrupt)
	var leased int
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*) FROM queen.cursors WHERE lease_id IS NOT NULL`).Scan(&leased))
	require.Zero(t, leased, "the lease stayed")

	_, err = s.pool.Exec(ctx, `UPDATE queen.log_segments SET checksum = checksum - 1`)
	require.NoError(t, err)
	msgs, _, _, _, _, err := s.popOnce(ctx, p)
	require.NoError(t, err)
	require.Len(t, msgs, 2, "the partition was not offered again")
}

// pop walks a candidate's segments before it locks the cursor; when the
// lock is taken (here by an open transaction), the claim fails and answers
// 'busy' after those segments. They must not reach the next candidate's
// claim, whose offsets they share.
func TestAClaimThatFailsAfterItsSegmentsWereReadDropsThem(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	var items []Item
	for i, part := range []string{"a", "a", "b", "b"} {
		items = append(items, Item{Queue: "q", Partition: part, Payload: json.RawMessage(strconv.Itoa(i))})
	}
	out, _, err := s.Push(ctx, s.pool, "default", "", items)
	require.NoError(t, err)
	a, b := out[0].Partition.ID, out[2].Partition.ID
	q, err := s.LookupQueue(ctx, "default", "q")
	require.NoError(t, err)
	_, err = s.pool.Exec(ctx, `INSERT INTO queen.cursors (partition_id, consumer_group) VALUES ($1, $2)`, pgUUID(a), QueueMode)
	require.NoError(t, err)

	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `SELECT FROM queen.cursors WHERE partition_id = $1 FOR UPDATE`, pgUUID(a))
	require.NoError(t, err)

	p := &popRequest{tenant: "default", queue: "q", group: QueueMode, batch: 10, partitions: 2, subStart: "all"}
	claims, outcomes, err := s.claim(ctx, p, q, []uuid.UUID{a, b}, pgtype.UUID{Bytes: uuid.New(), Valid: true})
	require.NoError(t, err)
	require.Equal(t, []candidateOutcome{{hotlist.Busy, time.Time{}}, {hotlist.Claimed, outcomes[1].retryAt}}, outcomes)
	require.Len(t, claims, 1)
	require.Equal(t, b, claims[0].id)
	msgs, err := s.decode(q, claims, p, uuid.New())
	require.NoError(t, err)
	var got []string
	for _, m := range msgs {
		got = append(got, string(m.Data))
	}
	require.Equal(t, []string{"2", "3"}, got, "partition a's messages leaked into b's claim")
}
