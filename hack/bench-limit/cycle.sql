-- The least SQL of one streams cycle of B=100 and S=4: upsert the 4 state
-- rows of the (query, partition), store the 1-frame sink segment under the
-- sink partition's allocator, and move the group's cursor past the batch,
-- in one statement.
-- Client k works on partition k (mod :partitions): up to P clients never
-- wait for each other's row locks, as the broker's leases, and its pushes to
-- the partitions in turn, keep its requests apart.
\set p :client_id % :partitions + 1
WITH s AS (
    INSERT INTO queen_streams.state (query_id, partition_id, key, value, updated_at)
    SELECT '00000000-0000-0000-0001-000000000001'::uuid,
           ('00000000-0000-0000-0000-' || lpad(:p::text, 12, '0'))::uuid, k, '{"acc": 100}'::jsonb, now()
      FROM unnest(ARRAY['k0', 'k1', 'k2', 'k3']) AS k
    ON CONFLICT (query_id, partition_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
    RETURNING 1),
a AS (
    UPDATE queen.partitions
       SET next_offset = next_offset + 1, last_push_at = now()
     WHERE id = ('00000000-0000-0000-0001-' || lpad(:p::text, 12, '0'))::uuid
    RETURNING id, next_offset - 1 AS base),
seg AS (
    INSERT INTO queen.log_segments
        (partition_id, base_offset, frame_count, body, checksum, txids, min_created_at, max_created_at)
    SELECT id, base, 1, :sinkbody::bytea, 42, ARRAY[gen_random_uuid()::text], now(), now() FROM a
    RETURNING 1),
c AS (
    UPDATE queen.cursors
       SET committed = committed + 100
     WHERE partition_id = ('00000000-0000-0000-0000-' || lpad(:p::text, 12, '0'))::uuid
       AND consumer_group = 'streams.limit'
    RETURNING 1)
SELECT (SELECT count(*) FROM s) AS states, (SELECT count(*) FROM seg) AS segs, (SELECT count(*) FROM c) AS cursors
\gset
-- A cycle that did not write what it must fails the run.
\if :states != 4 or :segs != 1 or :cursors != 1
SELECT 'a cycle wrote the wrong rows'::int;
\endif
