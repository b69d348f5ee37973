package db_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// queen.ack_v2, given dead letters whose payloads the call lacks, answers
// nothing and writes nothing: it asks for each frame, sending the body of
// each segment once, with the first frame asked of it.
func TestAnAckThatNeedsPayloadsWritesNothingAndSendsEachSegmentOnce(t *testing.T) {
	f := newFixture(t)
	p := f.partition(f.queue("default", "q"), "a")
	f.segments(p, "t0 t1 t2", "t3 t4 t5")
	f.cursor(p, "__QUEUE_MODE__", 0)
	f.lease(p, "__QUEUE_MODE__", 6, time.Now().Add(time.Minute), 0)
	before := f.cursorRow(p, "__QUEUE_MODE__")

	const n = 6
	pids, groups, txids, statuses, leases, errs := make([][16]byte, n), make([]string, n), make([]string, n),
		make([]string, n), make([][16]byte, n), make([]string, n)
	for i := range n {
		pids[i], groups[i], txids[i], statuses[i] = p, "__QUEUE_MODE__", fmt.Sprint("t", i), "dlq"
	}
	statuses[0] = "completed"
	rows, err := f.pool.Query(f.ctx, `SELECT item, success, frame_offset, segment_base, segment_body IS NOT NULL
		FROM queen.ack_v2(p_shard => ($1::uuid[])[1], p_tenant => 'default', p_partition_ids => $1, p_groups => $2, p_txids => $3, p_statuses => $4,
			p_lease_ids => $5, p_errors => $6, p_dlq_items => '{}', p_dlq_message_ids => '{}', p_dlq_payloads => '{}',
			p_dlq_key_ids => '{}', p_dlq_created => '{}')`, pids, groups, txids, statuses, leases, errs)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var item, offset, base int
		var success, body bool
		require.NoError(t, rows.Scan(&item, &success, &offset, &base, &body))
		require.False(t, success, "no answers, only requests")
		got = append(got, fmt.Sprintf("%d:%d@%d %v", item, offset, base, body))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"2:1@0 true", "3:2@0 false", "4:3@3 true", "5:4@3 false", "6:5@3 false"}, got)

	require.Equal(t, before, f.cursorRow(p, "__QUEUE_MODE__"), "the cursor is untouched")
	var letters int
	f.scan(`SELECT count(*) FROM queen.dead_letters`, nil, &letters)
	require.Zero(t, letters)
}
