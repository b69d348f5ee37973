-- Drops up to p_chunk segments of a queue that lie wholly below their
-- partition's floor (queen.raise_floors), and takes their bytes off the
-- partitions' stored_bytes, the counter the tenant quota's maxStoredBytes
-- is checked against, which queen.log_push_one_v1 adds to and
-- queen.log_push_undo takes back: the three are its only writers. Returns
-- how many segments went; the sweep calls it again until it drops less
-- than a chunk, each call a transaction of its own.
--
-- The partitions are locked in id order after the delete, as pushes lock
-- them, so that a sweep and a push never deadlock. One probe of the
-- primary key per partition of the queue.
CREATE OR REPLACE FUNCTION queen.drop_below_floors(p_queue_id uuid, p_chunk integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_ids   uuid[];
    v_bytes bigint[];
    v_n     integer;
BEGIN
    WITH gone AS (
        DELETE FROM queen.log_segments WHERE ctid IN (
            SELECT s.ctid FROM queen.partitions p
             CROSS JOIN LATERAL (SELECT x.ctid FROM queen.log_segments x
                                  WHERE x.partition_id = p.id AND x.base_offset < p.floor_offset
                                    AND x.base_offset + x.frame_count <= p.floor_offset) s
             WHERE p.queue_id = p_queue_id AND p.floor_offset > 0
             LIMIT p_chunk)
        RETURNING partition_id, octet_length(body) AS size)
    SELECT array_agg(f.partition_id ORDER BY f.partition_id), array_agg(f.bytes ORDER BY f.partition_id), sum(f.n)
      INTO v_ids, v_bytes, v_n
      FROM (SELECT partition_id, sum(size)::bigint AS bytes, count(*) AS n FROM gone GROUP BY partition_id) f;
    IF v_n IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM FROM queen.partitions p WHERE p.id = ANY (v_ids) ORDER BY p.id FOR UPDATE;
    UPDATE queen.partitions p SET stored_bytes = p.stored_bytes - f.bytes
      FROM unnest(v_ids, v_bytes) AS f (id, bytes) WHERE p.id = f.id;
    RETURN v_n;
END
$$;
