-- The one seek rule. It moves the group's cursors on the tenant's queue (on
-- its partition p_partition alone, when not NULL) and returns the cursors
-- moved: the pops must look at their partitions again. A partition the
-- group has not reached has no cursor and is left alone: its first pop
-- starts it.
--
-- Where a cursor goes. To p_at 'infinity': just past its partition's newest
-- message; a partition without messages is left alone. To any other p_at:
-- just after the last message created at or before p_at, at segment
-- granularity as the subscription start is. A cursor with no message that
-- old (or with p_at NULL) starts over where the group's subscription starts
-- (the beginning without one), as on the group's first pop; its row stays,
-- so that an ack of the batch it left is refused for its lease rather than
-- not found. No cursor goes below its partition's floor: what is below was
-- deleted by retention or eviction.
--
-- Every moved cursor loses its lease, and with it the retry count, which
-- counted a batch that is no longer the one at the cursor
-- (queen.lease_release_v2). The batch bounds
-- stay, so that an ack of a message of the old batch is still recognised:
-- behind the cursor it reads as already acknowledged, ahead of it the
-- missing lease refuses it. The admin API's seeks (to a time, to the end,
-- and one partition to its end) and the StreamQuery rewind
-- (queen_streams.query_rewind) all move cursors through here.
-- PL/pgSQL, not SQL: Citus refuses a SQL function over its tables that runs
-- with parameters (CITUS.md).
CREATE OR REPLACE FUNCTION queen.seek_to_v2(p_tenant text, p_queue text, p_group text, p_partition text, p_at timestamptz)
RETURNS TABLE (queue_id uuid, partition_id uuid) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH t AS (
        SELECT c.partition_id, q.id AS queue_id,
               CASE WHEN p_at = 'infinity' THEN p.next_offset
               ELSE greatest(coalesce((SELECT s.base_offset + s.frame_count FROM queen.log_segments s
                                        WHERE s.partition_id = c.partition_id AND s.max_created_at <= p_at
                                        ORDER BY s.base_offset DESC LIMIT 1),
                                      (SELECT s.base_offset + s.frame_count FROM queen.log_segments s, queen.subscriptions x
                                        WHERE s.partition_id = c.partition_id AND x.queue_id = q.id AND x.consumer_group = p_group
                                          AND s.max_created_at <= x.starts_after
                                        ORDER BY s.base_offset DESC LIMIT 1),
                                      0), p.floor_offset) END AS at
          FROM queen.cursors c
          JOIN queen.partitions p ON p.id = c.partition_id
          JOIN queen.queues q ON q.id = p.queue_id
         WHERE q.tenant = p_tenant AND q.name = p_queue AND c.consumer_group = p_group
           AND (p_partition IS NULL OR p.name = p_partition)
           AND (p_at IS DISTINCT FROM 'infinity' OR EXISTS (SELECT FROM queen.log_segments s WHERE s.partition_id = p.id))
           FOR UPDATE OF c
    )
    UPDATE queen.cursors c
       SET committed = t.at,
           (lease_id, lease_expires_at, retry_count) = (SELECT r.lease_id, r.lease_expires_at, r.retry_count
                                                          FROM queen.lease_release_v2(c.lease_id, c.lease_expires_at, c.retry_count, true, true) r)
      FROM t WHERE c.partition_id = t.partition_id AND c.consumer_group = p_group
    RETURNING t.queue_id, c.partition_id;
END
$$;
