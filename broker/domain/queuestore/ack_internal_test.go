package queuestore

import (
	"github.com/regent-mq/regent/broker/domain/catalog"
	regentdb "github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/regent-mq/regent/broker/domain/produce"
	"github.com/stretchr/testify/require"
)

// The common case of an ack has a function of its own (queen.ack_cursor,
// set-based); queen.ack_v2 handles everything. On the same states and
// requests the two must give the same answers and leave the same cursor,
// and both must ask for an announcement exactly when the ack released the
// lease with data left to deliver.
func TestAckCursorAnswersAsAckEach(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 40; round++ {
		queue := fmt.Sprintf("q%d", round)
		items := make([]produce.Item, 12)
		for i := range items {
			items[i] = produce.Item{Queue: queue, Payload: json.RawMessage(fmt.Sprint(i))}
		}
		// Two segments, so that batches span them.
		first, err := s.producer.Emit(ctx, produce.Write{Tenant: "default", Items: items[:5]})
		require.NoError(t, err)
		second, err := s.producer.Emit(ctx, produce.Write{Tenant: "default", Items: items[5:]})
		require.NoError(t, err)
		pushed := append(first.Pushed, second.Pushed...)
		pid := pushed[0].Partition.ID

		got, err := s.Pop(ctx, &PopRequest{Tenant: "default", Queue: queue, Group: catalog.QueueMode,
			Batch: 2 + rng.IntN(10), Partitions: 1, SubStart: "all"})
		msgs, leaseID := got.Messages, got.LeaseID
		require.NoError(t, err)
		require.NotEmpty(t, msgs)
		switch rng.IntN(4) { // the state the ack meets
		case 0: // part of the batch acknowledged already
			_, err = s.Ack(ctx, s.db, "default", []regentdb.QueueAck{{PartitionID: pid, TransactionID: msgs[rng.IntN(len(msgs))].TransactionID,
				Status: "completed", Group: catalog.QueueMode}})
		case 1: // released by a failure
			_, err = s.Ack(ctx, s.db, "default", []regentdb.QueueAck{{PartitionID: pid, TransactionID: msgs[0].TransactionID,
				Status: "failed", Group: catalog.QueueMode}})
		case 2: // expired
			err = s.dbt.ExpireLeases(ctx, "default", queue)
		}
		require.NoError(t, err)

		var lease pgtype.UUID
		switch rng.IntN(3) {
		case 0:
			lease = pgtype.UUID{Bytes: leaseID, Valid: true}
		case 1:
			lease = pgtype.UUID{Bytes: uuid.New(), Valid: true}
		}
		var acks []regentdb.QueueAck
		for range 1 + rng.IntN(8) {
			txid := "unknown"
			if k := rng.IntN(len(pushed) + 2); k < len(pushed) {
				txid = pushed[k].TransactionID
			}
			acks = append(acks, regentdb.QueueAck{PartitionID: pid, TransactionID: txid, Status: "completed", LeaseID: lease.Bytes, HasLease: lease.Valid, Group: catalog.QueueMode})
		}
		require.True(t, oneCursorCompleted(acks))

		run := func(f func(*regentdb.DB, context.Context, string, []regentdb.QueueAck) ([]regentdb.AckResult, error)) ([]regentdb.AckResult, string, bool) {
			var out []regentdb.AckResult
			var state string
			var held, released, left bool
			err := s.db.InTx(ctx, func(tx *regentdb.DB) error {
				cursor := func() (dbtest.Cursor, error) {
					c, err := dbtest.Over(tx.Conn().(pgx.Tx)).Cursors(ctx, "default", queue)
					if err != nil || len(c) != 1 {
						return dbtest.Cursor{}, fmt.Errorf("the cursor of %s: %v %w", queue, c, err)
					}
					return c[0], nil
				}
				c, err := cursor()
				if err != nil {
					return err
				}
				held = c.LeaseID != nil
				if out, err = f(tx, ctx, "default", acks); err != nil {
					return err
				}
				if c, err = cursor(); err != nil {
					return err
				}
				state = fmt.Sprint(c.Committed, c.LeaseID == nil, c.LeaseExpiresAt == nil, c.RetryCount, c.TotalConsumed)
				released, left = c.LeaseID == nil, c.Committed < int64(len(items))
				return errUndo
			})
			require.ErrorIs(t, err, errUndo, "round %d", round)
			return out, state, held && released && left
		}
		wantOut, wantState, wantAnnounce := run((*regentdb.DB).Ack)
		gotOut, gotState, _ := run((*regentdb.DB).AckCursor)
		require.Equal(t, wantAnnounce, announced(wantOut), "round %d: ack's announce", round)
		require.Equal(t, wantAnnounce, announced(gotOut), "round %d: ack_cursor's announce", round)
		require.Equal(t, wantOut, gotOut, "round %d", round)
		require.Equal(t, wantState, gotState, "round %d", round)
	}
}

// announced reports whether any answer asks for an announcement, and clears
// the flags.
func announced(out []regentdb.AckResult) bool {
	yes := false
	for i := range out {
		yes = yes || out[i].Announce
		out[i].Announce = false
	}
	return yes
}

// retentionAfterFirstCall is a regentdb.Querier that deletes every segment of the
// store after its first query: retention landing between queen.ack_v2 naming a
// dead letter's frame and the broker passing its payload.
type retentionAfterFirstCall struct {
	regentdb.Querier
	t     *testing.T
	empty func(context.Context) error // deletes the segments
	calls int
}

func (r *retentionAfterFirstCall) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if r.calls++; r.calls == 2 {
		require.NoError(r.t, r.empty(ctx))
	}
	return r.Querier.Query(ctx, sql, args...)
}

func TestADeadLetterRetentionRemovedMeanwhileIsMessageNotFound(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	_, err := s.producer.Emit(ctx, produce.Write{Tenant: "default", Items: []produce.Item{{Queue: "q", Payload: json.RawMessage(`1`)}}})
	require.NoError(t, err)
	got, err := s.Pop(ctx, &PopRequest{Tenant: "default", Queue: "q", Group: catalog.QueueMode, Batch: 1, Partitions: 1, SubStart: "all"})
	msgs := got.Messages
	require.NoError(t, err)
	require.Len(t, msgs, 1)

	empty := func(ctx context.Context) error { return s.dbt.EmptyPartition(ctx, "default", "q", "Default") }
	out, err := s.Ack(ctx, regentdb.Over(&retentionAfterFirstCall{Querier: s.db.Conn(), t: t, empty: empty}), "default", []regentdb.QueueAck{{PartitionID: msgs[0].PartitionID,
		TransactionID: msgs[0].TransactionID, Status: "dlq", Group: catalog.QueueMode}})
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.False(t, out[0].Success)
	require.Equal(t, "Message not found", *out[0].Error)
	letters, err := s.dbt.DeadLetters(ctx, "default", "q")
	require.NoError(t, err)
	require.Empty(t, letters)
}

// countingQuerier is a regentdb.Querier that counts the round trips made through it.
type countingQuerier struct {
	regentdb.Querier
	calls int
}

func (c *countingQuerier) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.calls++
	return c.Querier.Query(ctx, sql, args...)
}

func (c *countingQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.calls++
	return c.Querier.QueryRow(ctx, sql, args...)
}

// popAll pushes n messages to queue/partition in segments of per, and pops
// them all in one batch.
func popAll(t *testing.T, s testStore, queue, partition string, n, per int) []Message {
	t.Helper()
	ctx := t.Context()
	for i := 0; i < n; i += per {
		var items []produce.Item
		for j := i; j < min(i+per, n); j++ {
			items = append(items, produce.Item{Queue: queue, Partition: partition, Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, j))})
		}
		_, err := s.producer.Emit(ctx, produce.Write{Tenant: "default", Items: items})
		require.NoError(t, err)
	}
	got, err := s.Pop(ctx, &PopRequest{Tenant: "default", Queue: queue, Partition: partition, Group: catalog.QueueMode,
		Batch: n, Partitions: 1, SubStart: "all"})
	msgs := got.Messages
	require.NoError(t, err)
	require.Len(t, msgs, n)
	return msgs
}

func TestAnAckWithManyDeadLettersTakesOneMoreCallAtMost(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	// Dead letters over three segments of two partitions, between acks of
	// other statuses.
	popped := append(popAll(t, s, "q", "a", 20, 10), popAll(t, s, "q", "b", 5, 5)...)
	var acks []regentdb.QueueAck
	for i, m := range popped {
		a := regentdb.QueueAck{PartitionID: m.PartitionID, TransactionID: m.TransactionID, Status: "dlq", Group: catalog.QueueMode}
		if i%7 == 3 {
			a.Status = "completed"
		}
		acks = append(acks, a)
	}
	db := &countingQuerier{Querier: s.db.Conn()}
	out, err := s.Ack(ctx, regentdb.Over(db), "default", acks)
	require.NoError(t, err)
	require.Equal(t, 2, db.calls, "one call naming the frames, one passing their payloads")
	require.Len(t, out, len(acks))
	want := map[string]string{}
	for i, r := range out {
		require.True(t, r.Success, "item %d: %v", i, r.Error)
		require.Equal(t, acks[i].Status == "dlq", r.DLQ, "item %d", i)
		if r.DLQ {
			want[popped[i].ID.String()] = string(popped[i].Data)
		}
	}
	letters, err := s.dbt.DeadLetters(ctx, "default", "q")
	require.NoError(t, err)
	got := map[string]string{}
	for _, l := range letters {
		got[l.MessageID] = l.Payload
	}
	require.Equal(t, want, got, "every dead letter keeps its own payload")

	// Without dead letters, one call.
	popped = popAll(t, s, "q", "c", 3, 3)
	db.calls = 0
	_, err = s.Ack(ctx, regentdb.Over(db), "default", []regentdb.QueueAck{{PartitionID: popped[0].PartitionID, TransactionID: popped[0].TransactionID,
		Status: "retry", Group: catalog.QueueMode}})
	require.NoError(t, err)
	require.Equal(t, 1, db.calls)
}

func TestAGeneralAckRefusesAnExpiredLease(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	popped := popAll(t, s, "q", "a", 2, 2)
	require.NoError(t, s.dbt.ExpireLeases(ctx, "default", "q"))
	cursors, err := s.dbt.Cursors(ctx, "default", "q")
	require.NoError(t, err)
	out, err := s.Ack(ctx, s.db, "default", []regentdb.QueueAck{{PartitionID: popped[0].PartitionID, TransactionID: popped[0].TransactionID,
		Status: "failed", LeaseID: uuid.MustParse(*cursors[0].LeaseID), HasLease: true, Group: catalog.QueueMode}})
	require.NoError(t, err)
	require.False(t, out[0].Success)
	require.Equal(t, "Invalid or expired lease", *out[0].Error)
}

// A frame that the ack finds but whose segment does not hold it (here a
// corrupt frame count) would be asked for on every call: the second request
// is an error, not a loop.
func TestAnAckAskedTwiceForOnePayloadFails(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	popped := popAll(t, s, "q", "a", 3, 3)
	require.NoError(t, s.dbt.ClaimFrames(ctx, "default", "q", 1))
	db := &countingQuerier{Querier: s.db.Conn()}
	_, err := s.Ack(ctx, regentdb.Over(db), "default", []regentdb.QueueAck{{PartitionID: popped[2].PartitionID, TransactionID: popped[2].TransactionID,
		Status: "dlq", Group: catalog.QueueMode}})
	require.ErrorContains(t, err, "asked twice for the payload of item 1")
	require.Equal(t, 2, db.calls)
}

// errUndo rolls back a transaction that only looked.
var errUndo = errors.New("undo")
