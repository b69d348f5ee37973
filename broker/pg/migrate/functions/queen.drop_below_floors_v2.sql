-- Drops up to p_chunk segments, of partitions of one shard
-- (queen.segments_below_floors groups them), that lie wholly below their
-- partition's floor (queen.raise_floors_v2), and takes their bytes off the
-- partitions' stored_bytes, the counter the tenant quota's maxStoredBytes
-- is checked against, which queen.log_push_one_v1 adds to and
-- queen.log_push_undo takes back: the three are its only writers. Returns
-- how many segments went; the sweep calls it again until it drops less
-- than a chunk, each call a transaction of its own: on Citus a call that
-- goes whole to the shard's worker (its distribution argument p_shard, the
-- first of them), where every statement below touches that shard alone.
--
-- The segments are found, then deleted by their key: every statement names
-- the partitions by their id, which is how Citus keeps it on one shard, and
-- PostgreSQL then finds each segment by its primary key. The partitions are
-- locked in id order after the delete, as pushes lock them, so that a sweep
-- and a push never deadlock. Successor of queen.drop_below_floors, which
-- took a queue.
CREATE OR REPLACE FUNCTION queen.drop_below_floors_v2(p_shard uuid, p_partitions uuid[], p_chunk integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_parts uuid[];
    v_bases bigint[];
    v_ids   uuid[];
    v_bytes bigint[];
    v_n     integer;
BEGIN
    SELECT array_agg(x.partition_id), array_agg(x.base_offset) INTO v_parts, v_bases
      FROM (SELECT y.partition_id, y.base_offset FROM queen.partitions p
             CROSS JOIN LATERAL (SELECT s.partition_id, s.base_offset FROM queen.log_segments s
                                  WHERE s.partition_id = p.id AND s.base_offset < p.floor_offset
                                    AND s.base_offset + s.frame_count <= p.floor_offset) y
             WHERE p.id = ANY (p_partitions) AND p.floor_offset > 0
             LIMIT p_chunk) x;
    IF v_parts IS NULL THEN
        RETURN 0;
    END IF;
    WITH gone AS (
        DELETE FROM queen.log_segments s
         USING unnest(v_parts, v_bases) AS g (partition_id, base_offset)
         WHERE s.partition_id = ANY (v_parts) AND s.partition_id = g.partition_id AND s.base_offset = g.base_offset
        RETURNING s.partition_id, octet_length(s.body) AS size)
    SELECT array_agg(f.partition_id ORDER BY f.partition_id), array_agg(f.bytes ORDER BY f.partition_id), sum(f.n)
      INTO v_ids, v_bytes, v_n
      FROM (SELECT partition_id, sum(size)::bigint AS bytes, count(*) AS n FROM gone GROUP BY partition_id) f;
    IF v_n IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM FROM queen.partitions p WHERE p.id = ANY (v_ids) ORDER BY p.id FOR UPDATE;
    UPDATE queen.partitions p SET stored_bytes = p.stored_bytes - f.bytes
      FROM unnest(v_ids, v_bytes) AS f (id, bytes) WHERE p.id = ANY (v_ids) AND p.id = f.id;
    RETURN v_n;
END
$$;
