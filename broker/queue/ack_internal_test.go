package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// The common case of an ack has a path of its own (ack_cursor plus the
// rules in ackCursor); ack handles everything. On the same states and
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
		items := make([]Item, 12)
		for i := range items {
			items[i] = Item{Queue: queue, Payload: json.RawMessage(fmt.Sprint(i))}
		}
		// Two segments, so that batches span them.
		pushed, _, err := s.Push(ctx, s.pool, "default", "", items[:5])
		require.NoError(t, err)
		more, _, err := s.Push(ctx, s.pool, "default", "", items[5:])
		require.NoError(t, err)
		pushed = append(pushed, more...)
		pid := pushed[0].Partition.ID

		msgs, _, leaseID, _, _, err := s.popOnce(ctx, &popRequest{tenant: "default", queue: queue, group: QueueMode,
			batch: 2 + rng.IntN(10), partitions: 1, subStart: "all"})
		require.NoError(t, err)
		require.NotEmpty(t, msgs)
		switch rng.IntN(4) { // the state the ack meets
		case 0: // part of the batch acknowledged already
			_, err = s.Ack(ctx, s.pool, "default", []Ack{{PartitionID: pid, TransactionID: msgs[rng.IntN(len(msgs))].TransactionID,
				Status: "completed", Group: QueueMode}})
		case 1: // released by a failure
			_, err = s.Ack(ctx, s.pool, "default", []Ack{{PartitionID: pid, TransactionID: msgs[0].TransactionID,
				Status: "failed", Group: QueueMode}})
		case 2: // expired
			_, err = s.pool.Exec(ctx, `UPDATE queen.cursors SET lease_expires_at = now() - interval '1 s' WHERE partition_id = $1`, pid)
		}
		require.NoError(t, err)

		var lease pgtype.UUID
		switch rng.IntN(3) {
		case 0:
			lease = pgtype.UUID{Bytes: leaseID, Valid: true}
		case 1:
			lease = pgtype.UUID{Bytes: uuid.New(), Valid: true}
		}
		var acks []Ack
		for range 1 + rng.IntN(8) {
			txid := "unknown"
			if k := rng.IntN(len(pushed) + 2); k < len(pushed) {
				txid = pushed[k].TransactionID
			}
			acks = append(acks, Ack{PartitionID: pid, TransactionID: txid, Status: "completed", LeaseID: lease, Group: QueueMode})
		}
		require.True(t, oneCursorCompleted(acks))

		run := func(f func(context.Context, Querier, string, []Ack) ([]AckResult, error)) ([]AckResult, string, bool) {
			var out []AckResult
			var state string
			var held, released, left bool
			err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				if err := tx.QueryRow(ctx, `SELECT lease_id IS NOT NULL FROM queen.cursors WHERE partition_id = $1`, pid).Scan(&held); err != nil {
					return err
				}
				var err error
				if out, err = f(ctx, tx, "default", acks); err != nil {
					return err
				}
				if err := tx.QueryRow(ctx, `SELECT format('%s %s %s %s %s', committed, lease_id IS NULL,
						lease_expires_at IS NULL, retry_count, total_consumed), lease_id IS NULL, committed < $2
						FROM queen.cursors WHERE partition_id = $1`,
					pid, len(items)).Scan(&state, &released, &left); err != nil {
					return err
				}
				return errRollback
			})
			require.ErrorIs(t, err, errRollback, "round %d", round)
			return out, state, held && released && left
		}
		wantOut, wantState, wantAnnounce := run(s.ackEach)
		gotOut, gotState, _ := run(s.ackCursor)
		require.Equal(t, wantAnnounce, announced(wantOut), "round %d: ack's announce", round)
		require.Equal(t, wantAnnounce, announced(gotOut), "round %d: ack_cursor's announce", round)
		require.Equal(t, wantOut, gotOut, "round %d", round)
		require.Equal(t, wantState, gotState, "round %d", round)
	}
}

// announced reports whether any answer asks for an announcement, and clears
// the flags.
func announced(out []AckResult) bool {
	yes := false
	for i := range out {
		yes = yes || out[i].announce
		out[i].announce = false
	}
	return yes
}

// retentionAfterFirstCall is a Querier that deletes every segment of the
// store after its first query: retention landing between queen.ack naming a
// dead letter's frame and the broker passing its payload.
type retentionAfterFirstCall struct {
	*pgxpool.Pool
	t     *testing.T
	calls int
}

func (r *retentionAfterFirstCall) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if r.calls++; r.calls == 2 {
		_, err := r.Exec(ctx, `DELETE FROM queen.log_segments`)
		require.NoError(r.t, err)
	}
	return r.Pool.Query(ctx, sql, args...)
}

func TestADeadLetterRetentionRemovedMeanwhileIsMessageNotFound(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	_, _, err := s.Push(ctx, s.pool, "default", "", []Item{{Queue: "q", Payload: json.RawMessage(`1`)}})
	require.NoError(t, err)
	msgs, _, _, _, _, err := s.popOnce(ctx, &popRequest{tenant: "default", queue: "q", group: QueueMode, batch: 1, partitions: 1, subStart: "all"})
	require.NoError(t, err)
	require.Len(t, msgs, 1)

	out, err := s.Ack(ctx, &retentionAfterFirstCall{Pool: s.pool, t: t}, "default", []Ack{{PartitionID: msgs[0].PartitionID,
		TransactionID: msgs[0].TransactionID, Status: "dlq", Group: QueueMode}})
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.False(t, out[0].Success)
	require.Equal(t, "Message not found", *out[0].Error)
	var letters int
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*) FROM queen.dead_letters`).Scan(&letters))
	require.Zero(t, letters)
}
