-- Raises the floors of partitions of one shard, each to its p_floors
-- (queen.floors_to_raise says where, and groups them by shard), in one
-- transaction: on Citus a call that goes whole to the shard's worker (its
-- distribution argument p_shard, the first of them), where every statement
-- below touches that shard alone (each names the partitions by their id);
-- on PostgreSQL, one call for the queue. Offsets below a floor are gone for
-- pops, acks and lookups; the segments now wholly below it are left to
-- queen.drop_below_floors_v2.
--
-- A cursor below a raised floor moves up to it, so that lag counts only
-- what is left; when its batch lies wholly below, its lease (or the
-- retryDelay of a failed batch) ends too (queen.lease_release_v2): nothing
-- of it is left to deliver, and acking it answers 'Message not found'
-- (queen.txid_offsets). Returns a row per partition whose floor rose: by
-- how many offsets (the messages removed, for the caller to count and
-- record), and whether a lease or a retryDelay ended there, which the
-- caller announces once committed: what follows the floor is deliverable
-- at once. A floor already at or past its p_floors (a sweep cut short
-- raised it, or the partition is gone) is left as it is.
--
-- The partitions, then the cursors, are locked in key order before they are
-- written, the order pushes and acks lock them in, so that a sweep cannot
-- deadlock with them. Successor, with queen.floors_to_raise, of
-- queen.raise_floors.
CREATE OR REPLACE FUNCTION queen.raise_floors_v2(p_shard uuid, p_partitions uuid[], p_floors bigint[])
RETURNS TABLE (partition_id uuid, removed bigint, released boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_ids      uuid[];
    v_floors   bigint[];
    v_was      bigint[];
    v_released uuid[];
BEGIN
    SELECT array_agg(p.id ORDER BY p.id), array_agg(u.floor ORDER BY p.id), array_agg(p.floor_offset ORDER BY p.id)
      INTO v_ids, v_floors, v_was
      FROM (SELECT x.id, x.floor_offset FROM queen.partitions x
             WHERE x.id = ANY (p_partitions) ORDER BY x.id FOR UPDATE) p
      JOIN unnest(p_partitions, p_floors) AS u (id, floor) ON u.id = p.id
     WHERE u.floor > p.floor_offset;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    UPDATE queen.partitions p SET floor_offset = u.floor
      FROM unnest(v_ids, v_floors) AS u (id, floor)
     WHERE p.id = ANY (v_ids) AND p.id = u.id;
    SELECT COALESCE(array_agg(DISTINCT l.partition_id) FILTER (WHERE l.ends), '{}') INTO v_released
      FROM (SELECT c.partition_id, c.lease_expires_at IS NOT NULL AND c.batch_end <= u.floor AS ends
              FROM queen.cursors c
              JOIN unnest(v_ids, v_floors) AS u (id, floor) ON c.partition_id = u.id
             WHERE c.partition_id = ANY (v_ids) AND c.committed < u.floor
             ORDER BY c.partition_id, c.consumer_group FOR UPDATE OF c) l;
    UPDATE queen.cursors c
       SET committed = u.floor,
           (lease_id, lease_expires_at, retry_count) = (SELECT r.lease_id, r.lease_expires_at, r.retry_count
                                                          FROM queen.lease_release_v2(c.lease_id, c.lease_expires_at, c.retry_count, c.batch_end <= u.floor, true) r)
      FROM unnest(v_ids, v_floors) AS u (id, floor)
     WHERE c.partition_id = ANY (v_ids) AND c.partition_id = u.id AND c.committed < u.floor;
    RETURN QUERY SELECT x.id, x.f - x.w, x.id = ANY (v_released) FROM unnest(v_ids, v_floors, v_was) AS x (id, f, w);
END
$$;
