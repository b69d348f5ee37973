package queuestore

import (
	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/commit"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"

	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/domain/hotlist"
	"github.com/regent-mq/regent/broker/domain/produce"
	"github.com/regent-mq/regent/broker/domain/segment"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/test/pgtest"
)

// testStore is a Store with the write path that fills it.
type testStore struct {
	*Store
	producer *produce.Producer
	dbt      *dbtest.DB // arranges and inspects the database
}

func newStore(t testing.TB) testStore {
	t.Helper()
	pool := pgtest.New(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, hot := metrics.New(), hotlist.New()
	d := db.New(pool)
	cat, after := catalog.New(d, config.DefaultCatalogSize), commit.New(hotlist.NewAnnouncer(hot, d, logger), hot, m)
	p := produce.New(d, cat, produce.Options{Metrics: m, Logger: logger})
	return testStore{New(d, cat, after, nil, nil, m, hot, logger, 64<<20), p, dbtest.New(pool)}
}

// A pop that took a lease but cannot answer (here a segment fails its
// checksum) gives the lease back and offers the partition again at once,
// not after the lease expires. No listener runs here: only the pop's own
// announcement can put the partition back on the hot list.
func TestAPopThatCannotAnswerReleasesItsLeaseAndOffersThePartitionAgain(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	items := []produce.Item{{Queue: "q", Payload: json.RawMessage(`1`)}, {Queue: "q", Payload: json.RawMessage(`2`)}}
	e, err := s.producer.Emit(ctx, produce.Write{Tenant: "default", Items: items})
	require.NoError(t, err)
	s.after.Apply(e.After)
	p := &PopRequest{Tenant: "default", Queue: "q", Group: catalog.QueueMode, Batch: 2, Partitions: 1, SubStart: "all"}

	require.NoError(t, s.dbt.ShiftChecksums(ctx, "default", "q", 1))
	_, err = s.Pop(ctx, p)
	require.ErrorIs(t, err, segment.ErrCorrupt)
	cursors, err := s.dbt.Cursors(ctx, "default", "q")
	require.NoError(t, err)
	for _, c := range cursors {
		require.Nil(t, c.LeaseID, "the lease stayed")
	}

	require.NoError(t, s.dbt.ShiftChecksums(ctx, "default", "q", -1))
	got, err := s.Pop(ctx, p)
	msgs := got.Messages
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
	var items []produce.Item
	for i, part := range []string{"a", "a", "b", "b"} {
		items = append(items, produce.Item{Queue: "q", Partition: part, Payload: json.RawMessage(strconv.Itoa(i))})
	}
	e, err := s.producer.Emit(ctx, produce.Write{Tenant: "default", Items: items})
	require.NoError(t, err)
	out := e.Pushed
	a, b := out[0].Partition.ID, out[2].Partition.ID
	q, err := s.catalog.LookupQueue(ctx, "default", "q")
	require.NoError(t, err)
	require.NoError(t, s.dbt.PlaceCursor(ctx, "default", "q", "a", catalog.QueueMode, 0))
	release, err := s.dbt.LockCursor(ctx, "default", "q", "a", catalog.QueueMode)
	require.NoError(t, err)
	defer release() //nolint:errcheck // a rollback of a transaction that only locked

	p := &PopRequest{Tenant: "default", Queue: "q", Group: catalog.QueueMode, Batch: 10, Partitions: 2, SubStart: "all"}
	claims, outcomes, err := s.claim(ctx, p, q, []uuid.UUID{a, b}, uuid.New())
	require.NoError(t, err)
	require.Equal(t, []db.PopLook{{Outcome: hotlist.Busy}, {Outcome: hotlist.Claimed, RetryAt: outcomes[1].RetryAt}}, outcomes)
	require.Len(t, claims, 1)
	require.Equal(t, b, claims[0].ID)
	msgs, _, err := s.decode(q, claims, p, uuid.New())
	require.NoError(t, err)
	var got []string
	for _, m := range msgs {
		got = append(got, string(m.Data))
	}
	require.Equal(t, []string{"2", "3"}, got, "partition a's messages leaked into b's claim")
}

// A final pop (wait=false) that finds nothing on the hot list asks the
// database before it answers empty: a push whose announcement has not
// reached this replica (here, none is made) is delivered, while a long-poll
// attempt waits for the announcement.
func TestAFinalPopFindsWhatTheHotListWasNotToldOf(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	push := func(part string) {
		t.Helper()
		e, err := s.producer.Emit(ctx, produce.Write{Tenant: "default", Items: []produce.Item{{Queue: "q", Partition: part, Payload: json.RawMessage(`1`)}}})
		require.NoError(t, err)
		if part == "a" {
			s.after.Apply(e.After)
		}
	}
	push("a")
	p := &PopRequest{Tenant: "default", Queue: "q", Group: catalog.QueueMode, Batch: 1, Partitions: 1, SubStart: "all", AutoAck: true}
	got, err := s.Pop(ctx, p)
	require.NoError(t, err)
	require.Len(t, got.Messages, 1)

	push("b") // not announced
	got, err = s.Pop(ctx, p)
	require.NoError(t, err)
	require.Empty(t, got.Messages, "a long-poll attempt waits for the announcement")
	p.Final = true
	got, err = s.Pop(ctx, p)
	require.NoError(t, err)
	require.Len(t, got.Messages, 1, "a final pop answered empty while partition b held a message")
	require.Equal(t, "b", got.Messages[0].Partition)
	got, err = s.Pop(ctx, p)
	require.NoError(t, err)
	require.Empty(t, got.Messages)
}
