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
-- The cursors are found without a lock, then each is moved (and so locked)
-- by statements of its own, in key order: on Citus its partitions may lie on
-- several shards, and no statement locks rows of several (CITUS.md).
CREATE OR REPLACE FUNCTION queen.seek_to_v2(p_tenant text, p_queue text, p_group text, p_partition text, p_at timestamptz)
RETURNS TABLE (queue_id uuid, partition_id uuid) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v    record;
    v_at bigint;
BEGIN
    FOR v IN SELECT c.partition_id AS pid, q.id AS qid, p.next_offset, p.floor_offset
               FROM queen.cursors c
               JOIN queen.partitions p ON p.id = c.partition_id
               JOIN queen.queues q ON q.id = p.queue_id
              WHERE q.tenant = p_tenant AND q.name = p_queue AND c.consumer_group = p_group
                AND (p_partition IS NULL OR p.name = p_partition)
                AND (p_at IS DISTINCT FROM 'infinity' OR EXISTS (SELECT FROM queen.log_segments s WHERE s.partition_id = p.id))
              ORDER BY c.partition_id LOOP
        IF p_at = 'infinity' THEN
            v_at := v.next_offset;
        ELSE
            SELECT s.base_offset + s.frame_count INTO v_at FROM queen.log_segments s
             WHERE s.partition_id = v.pid AND s.max_created_at <= p_at
             ORDER BY s.base_offset DESC LIMIT 1;
            IF v_at IS NULL THEN
                SELECT s.base_offset + s.frame_count INTO v_at FROM queen.log_segments s
                 WHERE s.partition_id = v.pid
                   AND s.max_created_at <= (SELECT x.starts_after FROM queen.subscriptions x
                                             WHERE x.queue_id = v.qid AND x.consumer_group = p_group)
                 ORDER BY s.base_offset DESC LIMIT 1;
            END IF;
            v_at := greatest(coalesce(v_at, 0), v.floor_offset);
        END IF;
        UPDATE queen.cursors c
           SET committed = v_at,
               (lease_id, lease_expires_at, retry_count) = (SELECT r.lease_id, r.lease_expires_at, r.retry_count
                                                              FROM queen.lease_release_v2(c.lease_id, c.lease_expires_at, c.retry_count, true, true) r)
         WHERE c.partition_id = v.pid AND c.consumer_group = p_group;
        CONTINUE WHEN NOT FOUND; -- deleted since it was found
        queue_id := v.qid;
        partition_id := v.pid;
        RETURN NEXT;
    END LOOP;
END
$$;
