-- The least SQL of one pop of B=100 and its ack: move the cursor past one
-- segment and read that segment, in one statement. The cursor wraps around
-- the :segments segments stored per partition, so the run never drains.
-- Client k works on partition k (mod :partitions): up to P clients never
-- wait for each other's row locks, as the broker's leases, and its pushes to
-- the partitions in turn, keep its requests apart.
\set p :client_id % :partitions + 1
WITH c AS (
    UPDATE queen.cursors
       SET committed = (committed + 100) % (100 * :segments)
     WHERE partition_id = ('00000000-0000-0000-0000-' || lpad(:p::text, 12, '0'))::uuid
       AND consumer_group = '__QUEUE_MODE__'
    RETURNING partition_id, (committed + 100 * :segments - 100) % (100 * :segments) AS base)
SELECT s.body, s.checksum
  FROM queen.log_segments s JOIN c ON s.partition_id = c.partition_id AND s.base_offset = c.base
-- Exactly one segment, or pgbench fails the run.
\gset
