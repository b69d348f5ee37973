package migrate_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/pgtest"
)

// queen.log_push_one_v1 records a request's client transaction ids before it
// writes its segments; when some were recorded before, the rows it just
// recorded for the others must go too, in every partition of the request.
func TestLogPushWritesNothingWhenAnyPartitionHoldsADuplicate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.New(t)
	q, a, b := uuid.New(), uuid.New(), uuid.New()
	// log_push takes the partitions in id order.
	if b.String() < a.String() {
		a, b = b, a
	}
	_, err := pool.Exec(ctx, `INSERT INTO queen.queues (id, name) VALUES ($1, 'q')`, q)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO queen.partitions (id, queue_id, name) VALUES ($2, $1, 'a'), ($3, $1, 'b')`, q, a, b)
	require.NoError(t, err)
	old := uuid.New()
	_, err = pool.Exec(ctx, `INSERT INTO queen.push_dedup (partition_id, transaction_id, message_id) VALUES ($1, 'seen', $2)`, b, old)
	require.NoError(t, err)

	push := func(pids []uuid.UUID, dedups []int32, txids []string) (outcomes []string, dups [][]string, dupIDs [][]uuid.UUID) {
		t.Helper()
		frames := make([]int32, len(pids))
		bodies := make([][]byte, len(pids))
		sums := make([]int64, len(pids))
		copy(frames, dedups)
		for i := range bodies {
			bodies[i] = []byte("segment")
		}
		rows, err := pool.Query(ctx, `SELECT outcome, dup_txids, dup_message_ids FROM queen.log_push_one_v1(
			p_partitions => $1, p_frames => $2, p_bodies => $3, p_checksums => $4, p_txids => $5,
			p_min_at => array_fill(now(), ARRAY[cardinality($1::uuid[])]), p_max_at => array_fill(now(), ARRAY[cardinality($1::uuid[])]),
			p_dedups => $6, p_dedup_txids => $5, p_dedup_msg_ids => $7)`,
			pids, frames, bodies, sums, txids, dedups, func() []uuid.UUID {
				ids := make([]uuid.UUID, len(txids))
				for i := range ids {
					ids[i] = uuid.New()
				}
				return ids
			}())
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var o string
			var d []string
			var ids []uuid.UUID
			require.NoError(t, rows.Scan(&o, &d, &ids))
			outcomes, dups, dupIDs = append(outcomes, o), append(dups, d), append(dupIDs, ids)
		}
		require.NoError(t, rows.Err())
		return outcomes, dups, dupIDs
	}

	outcomes, dups, dupIDs := push([]uuid.UUID{a, b}, []int32{2, 2}, []string{"a1", "a2", "b1", "seen"})
	require.Equal(t, []string{"duplicates"}, outcomes)
	require.Equal(t, [][]string{{"seen"}}, dups)
	require.Equal(t, [][]uuid.UUID{{old}}, dupIDs, "a duplicate answers the message id it was stored under")

	var recorded, segments int
	var offsets int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM queen.push_dedup), (SELECT count(*) FROM queen.log_segments),
		(SELECT sum(next_offset) FROM queen.partitions)`).Scan(&recorded, &segments, &offsets))
	require.Equal(t, 1, recorded, "the ids of the refused request are not remembered")
	require.Zero(t, segments)
	require.Zero(t, offsets)

	outcomes, _, _ = push([]uuid.UUID{a, b}, []int32{2, 1}, []string{"a1", "a2", "b1"})
	require.Equal(t, []string{"stored", "stored"}, outcomes, "the same request without the duplicate is new")
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM queen.push_dedup`).Scan(&recorded))
	require.Equal(t, 4, recorded)
}
