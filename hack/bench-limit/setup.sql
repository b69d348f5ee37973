-- The rows the pgbench scripts work on, in a database the broker migrated
-- (psql variables: partitions, segments, body, txids):
--   a source queue of :partitions partitions, each holding :segments
--   segments of 100 frames and a cursor for the queue mode and one for the
--   streams group of a query with 4 state rows per partition;
--   a sink queue with as many partitions;
--   the 64-row state shard that stateget reads, shaped as regent-bench's.
-- Partition ids are made from their numbers, so that the scripts can name
-- them from pgbench's integer variables.
INSERT INTO queen.queues (id, name) VALUES
    ('00000000-0000-0000-0000-000000000000', 'limit'),
    ('00000000-0000-0000-0001-000000000000', 'limit.sink');

INSERT INTO queen.partitions (id, queue_id, name, next_offset)
SELECT ('00000000-0000-0000-0000-' || lpad(i::text, 12, '0'))::uuid,
       '00000000-0000-0000-0000-000000000000'::uuid, 'p' || i, 100 * :segments
  FROM generate_series(1, :partitions) i
UNION ALL
SELECT ('00000000-0000-0000-0001-' || lpad(i::text, 12, '0'))::uuid,
       '00000000-0000-0000-0001-000000000000'::uuid, 'p' || i, 0
  FROM generate_series(1, :partitions) i;

INSERT INTO queen.log_segments
    (partition_id, base_offset, frame_count, body, checksum, txids, min_created_at, max_created_at)
SELECT p.id, s * 100, 100, :'body'::bytea, 42, :'txids'::text[], now(), now()
  FROM queen.partitions p, generate_series(0, :segments - 1) s
 WHERE p.queue_id = '00000000-0000-0000-0000-000000000000';

INSERT INTO queen.cursors (partition_id, consumer_group)
SELECT p.id, g
  FROM queen.partitions p, unnest(ARRAY['__QUEUE_MODE__', 'streams.limit']) g
 WHERE p.queue_id = '00000000-0000-0000-0000-000000000000';

INSERT INTO queen_streams.queries (id, name, source_queue, sink_queue, config_hash) VALUES
    ('00000000-0000-0000-0001-000000000001', 'limit.q', 'limit', 'limit.sink', 'limit'),
    ('00000000-0000-0000-0002-000000000001', 'limit.stateget', 'limit', NULL, 'limit');

-- Cycles update these rows, as a running query's cycles do.
INSERT INTO queen_streams.state (query_id, partition_id, key, value)
SELECT '00000000-0000-0000-0001-000000000001', p.id, k, '{"acc": 100}'
  FROM queen.partitions p, unnest(ARRAY['k0', 'k1', 'k2', 'k3']) k
 WHERE p.queue_id = '00000000-0000-0000-0000-000000000000';

INSERT INTO queen_streams.state (query_id, partition_id, key, value)
SELECT '00000000-0000-0000-0002-000000000001', '00000000-0000-0000-0002-000000000001',
       CASE WHEN i % 2 = 0
            THEN format(E'tumb:60\x1f2026-08-17T10:%s:00.000Z\x1fkey%s', lpad((i % 60)::text, 2, '0'), i)
            ELSE format(E'sess:30\x1f%s', i) END,
       jsonb_build_object('windowEnd', 1787047260000 + i * 60000, 'acc', i, 'key', 'key' || i)
  FROM generate_series(0, 63) i;

VACUUM ANALYZE;
