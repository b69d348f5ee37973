package migrate_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/pgtest"
)

// previousAddTrace is the previous release's trace recording (db.AddTrace),
// which its brokers send while a rolling upgrade runs: names without their
// partition id (migration 0019).
const previousAddTrace = `WITH m AS (
		SELECT p.id, coalesce(
		         (SELECT (queen.txid_offsets(p_partition_id => p.id, p_from => c.batch_start, p_to => c.batch_end,
		                                     p_txids => ARRAY[$3::text]))[1]
		            FROM queen.cursors c
		           WHERE c.partition_id = p.id AND c.consumer_group = $5 AND c.batch_end IS NOT NULL),
		         (queen.txid_offsets(p_partition_id => p.id, p_from => 0, p_to => p.next_offset,
		                             p_txids => ARRAY[$3::text]))[1]) AS off
		  FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id AND q.tenant = $1
		 WHERE p.id = $2),
	t AS (
		INSERT INTO queen.traces (id, partition_id, transaction_id, message_offset, consumer_group, event_type, data, worker_id)
		SELECT $4, m.id, $3, m.off, $5, $6, $7, $8 FROM m WHERE m.off IS NOT NULL
		RETURNING id),
	n AS (
		INSERT INTO queen.trace_names (tenant, name, trace_id)
		SELECT $1, name, t.id FROM t, unnest($9::text[]) AS name)
	SELECT count(*) FROM t`

// While a rolling upgrade runs, the previous release's brokers still record
// traces with their names, and a trace's deletion takes its names, theirs
// and the new release's (queen.trace_add) alike.
func TestThePreviousReleasesTraceRecordingKeepsWorkingAndItsNamesGoWithTheirTrace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.New(t)
	q, p := uuid.New(), uuid.New()
	_, err := pool.Exec(ctx, `INSERT INTO queen.queues (id, name) VALUES ($1, 'q')`, q)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO queen.partitions (id, queue_id, name, next_offset) VALUES ($2, $1, 'p', 2)`, q, p)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO queen.log_segments (partition_id, base_offset, frame_count, body, checksum, txids,
		min_created_at, max_created_at) VALUES ($1, 0, 2, '\x00', 0, '{m0,m1}', now(), now())`, p)
	require.NoError(t, err)

	var n int
	require.NoError(t, pool.QueryRow(ctx, previousAddTrace, "default", p, "m0", uuid.New(), "g", "info", `{}`, "w",
		[]string{"a", "b"}).Scan(&n))
	require.Equal(t, 1, n, "the previous release's statement records its trace")
	var found bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT queen.trace_add($1, 'default', 'm1', $2, 'g', 'info', '{}', 'w', '{a}')`,
		p, uuid.New()).Scan(&found))
	require.True(t, found)

	var names, without int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE partition_id IS NULL) FROM queen.trace_names`).
		Scan(&names, &without))
	require.Equal(t, 3, names)
	require.Equal(t, 2, without, "the previous release's names carry no partition id")

	_, err = pool.Exec(ctx, `DELETE FROM queen.traces`)
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM queen.trace_names`).Scan(&names))
	require.Zero(t, names, "names go with their trace")
}
