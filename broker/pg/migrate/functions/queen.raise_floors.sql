-- Raises the floors (queen.partitions.floor_offset) of a queue's partitions
-- for one age limit, the step that retention and eviction share: the new
-- floor is the base offset of the partition's first segment whose newest
-- message is not older than p_seconds, or the partition's end when none is
-- (segment granularity: a segment's frames were created within microseconds
-- of each other). Finding it reads, in offset order, the segments that are
-- about to go and one more; with p_consumed, none past the lowest cursor.
-- The caller summarizes the BRIN index first (brin_summarize_new_values),
-- since a block range not yet summarized matches every search.
--
-- With p_consumed (completedRetentionSeconds) the floor stops at the lowest
-- committed cursor, so that only what every cursor consumed goes, and a
-- partition is skipped when it has no cursor, or when a group subscribed to
-- the queue has none on it yet (that group may still read it from the
-- start). A cursor that never moved is at 0 and keeps everything.
--
-- A cursor below a raised floor moves up to it, so that lag counts only
-- what is left; when its batch lies wholly below, its lease (or the
-- retryDelay of a failed batch) ends too (queen.lease_release_v2): nothing of it is left to deliver,
-- and acking it answers 'Message not found' (queen.txid_offsets). The
-- segments now wholly below a floor are left for the caller to drop in
-- chunks. Returns a row per partition whose floor rose: by how many
-- offsets (the messages removed, for the caller to count and record), and
-- whether a lease or a retryDelay ended there, which the caller announces:
-- what follows the floor is deliverable at once.
--
-- The partitions, then the cursors, are locked in key order before they are
-- written, the order pushes and acks lock them in, so that a sweep cannot
-- deadlock with them.
CREATE OR REPLACE FUNCTION queen.raise_floors(p_queue_id uuid, p_seconds integer, p_consumed boolean)
RETURNS TABLE (partition_id uuid, removed bigint, released boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_ids      uuid[];
    v_floors   bigint[];
    v_was      bigint[];
    v_released uuid[];
BEGIN
    SELECT array_agg(t.id ORDER BY t.id), array_agg(t.floor ORDER BY t.id), array_agg(t.was ORDER BY t.id)
      INTO v_ids, v_floors, v_was
      FROM (SELECT p.id, p.floor_offset AS was,
                   CASE WHEN p_consumed THEN least(young.at, low.committed) ELSE young.at END AS floor
              FROM queen.partitions p
              LEFT JOIN LATERAL (SELECT min(c.committed) AS committed FROM queen.cursors c
                                  WHERE c.partition_id = p.id) low ON true
             CROSS JOIN LATERAL (SELECT COALESCE((
                      SELECT s.base_offset FROM queen.log_segments s
                       WHERE s.partition_id = p.id
                         AND s.base_offset + s.frame_count > p.floor_offset
                         AND s.base_offset < CASE WHEN p_consumed THEN low.committed ELSE p.next_offset END
                         AND s.max_created_at >= now() - make_interval(secs => p_seconds)
                       ORDER BY s.base_offset LIMIT 1), p.next_offset) AS at) young
             WHERE p.queue_id = p_queue_id
               -- Only partitions holding a segment past the limit can
               -- change: the BRIN index on max_created_at finds them
               -- without a probe per partition.
               AND p.id IN (SELECT s.partition_id FROM queen.log_segments s
                             WHERE s.max_created_at < now() - make_interval(secs => p_seconds))
               AND (NOT p_consumed OR (low.committed IS NOT NULL AND NOT EXISTS (
                        SELECT FROM queen.subscriptions sub
                         WHERE sub.queue_id = p.queue_id AND NOT EXISTS (
                               SELECT FROM queen.cursors c
                                WHERE c.partition_id = p.id AND c.consumer_group = sub.consumer_group))))) t
     WHERE t.floor > t.was;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    PERFORM FROM queen.partitions p WHERE p.id = ANY (v_ids) ORDER BY p.id FOR UPDATE;
    -- greatest: a concurrent sweep may have raised it further meanwhile.
    UPDATE queen.partitions p SET floor_offset = greatest(p.floor_offset, u.floor)
      FROM unnest(v_ids, v_floors) AS u (id, floor)
     WHERE p.id = u.id;
    SELECT COALESCE(array_agg(DISTINCT l.partition_id) FILTER (WHERE l.ends), '{}') INTO v_released
      FROM (SELECT c.partition_id, c.lease_expires_at IS NOT NULL AND c.batch_end <= u.floor AS ends
              FROM queen.cursors c
              JOIN unnest(v_ids, v_floors) AS u (id, floor) ON c.partition_id = u.id
             WHERE c.committed < u.floor
             ORDER BY c.partition_id, c.consumer_group FOR UPDATE OF c) l;
    UPDATE queen.cursors c
       SET committed = u.floor,
           (lease_id, lease_expires_at, retry_count) = (SELECT r.lease_id, r.lease_expires_at, r.retry_count
                                                          FROM queen.lease_release_v2(c.lease_id, c.lease_expires_at, c.retry_count, c.batch_end <= u.floor, true) r)
      FROM unnest(v_ids, v_floors) AS u (id, floor)
     WHERE c.partition_id = u.id AND c.committed < u.floor;
    RETURN QUERY SELECT x.id, x.f - x.w, x.id = ANY (v_released) FROM unnest(v_ids, v_floors, v_was) AS x (id, f, w);
END
$$;
