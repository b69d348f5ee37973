-- The least SQL of one push request of B=100: move the partition's
-- allocator and store the segment it places, in one statement (one round
-- trip, one commit). :body is a segment as the broker packs one, :txids its
-- 100 transaction ids.
-- Client k works on partition k (mod :partitions): up to P clients never
-- wait for each other's row locks, as the broker's leases, and its pushes to
-- the partitions in turn, keep its requests apart.
\set p :client_id % :partitions + 1
WITH a AS (
    UPDATE queen.partitions
       SET next_offset = next_offset + 100, last_push_at = now()
     WHERE id = ('00000000-0000-0000-0000-' || lpad(:p::text, 12, '0'))::uuid
    RETURNING id, next_offset - 100 AS base)
INSERT INTO queen.log_segments
    (partition_id, base_offset, frame_count, body, checksum, txids, min_created_at, max_created_at)
SELECT id, base, 100, :body::bytea, 42, :txids::text[], now(), now() FROM a
RETURNING base_offset
-- Exactly one row, or pgbench fails the run.
\gset
