package dbtest

import (
	"context"
	"fmt"
)

// Dump is everything a tenant owns, as text: its queues, partitions,
// cursors and leases, segments, dead letters, streams queries and their
// state. Two dumps are equal when nothing of the tenant's changed between
// them, for a test that requires another tenant to have touched nothing.
func (d *DB) Dump(ctx context.Context, tenant string) (string, error) {
	var s string
	err := d.pool.QueryRow(ctx, `SELECT concat_ws(' | ',
		(SELECT string_agg(concat_ws(',', q.name, q.lease_time), ';' ORDER BY q.name) FROM queen.queues q WHERE q.tenant = $1),
		(SELECT string_agg(concat_ws(',', q.name, p.name, p.next_offset), ';' ORDER BY q.name, p.name)
		   FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant = $1),
		(SELECT string_agg(concat_ws(',', q.name, p.name, c.consumer_group, c.committed, c.batch_end, c.lease_id, c.lease_expires_at, c.retry_count), ';'
		          ORDER BY q.name, p.name, c.consumer_group)
		   FROM queen.cursors c JOIN queen.partitions p ON p.id = c.partition_id JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant = $1),
		(SELECT string_agg(concat_ws(',', q.name, p.name, s.base_offset, s.checksum, array_to_string(s.txids, ':')), ';' ORDER BY q.name, p.name, s.base_offset)
		   FROM queen.log_segments s JOIN queen.partitions p ON p.id = s.partition_id JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant = $1),
		(SELECT count(*) FROM queen.dead_letters l JOIN queen.partitions p ON p.id = l.partition_id JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant = $1),
		(SELECT string_agg(concat_ws(',', name, source_queue, sink_queue, config_hash), ';' ORDER BY name) FROM queen_streams.queries WHERE tenant = $1),
		(SELECT string_agg(concat_ws(',', x.name, s.key, s.value::text), ';' ORDER BY x.name, s.key)
		   FROM queen_streams.state s JOIN queen_streams.queries x ON x.id = s.query_id WHERE x.tenant = $1))`, tenant).Scan(&s)
	if err != nil {
		return "", fmt.Errorf("dump tenant %q: %w", tenant, err)
	}
	return s, nil
}

// Objects counts the queues and the streams queries of every tenant: for a
// test that requires a refused request to have made none, whoever it
// would have made them for.
func (d *DB) Objects(ctx context.Context) (int, error) {
	var n int
	if err := d.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM queen.queues) + (SELECT count(*) FROM queen_streams.queries)`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the queues and queries: %w", err)
	}
	return n, nil
}
