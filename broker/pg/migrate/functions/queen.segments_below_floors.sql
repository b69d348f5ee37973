-- The partitions of a queue that hold segments wholly below their floors
-- (queen.raise_floors_v2), for queen.drop_below_floors_v2 to drop, grouped
-- by shard (queen.shard_leads), a row per group: on PostgreSQL, one group.
-- One probe of the primary key per partition of the queue whose floor rose
-- once; on Citus a read over the shards.
CREATE OR REPLACE FUNCTION queen.segments_below_floors(p_queue_id uuid)
RETURNS TABLE (shard uuid, partitions uuid[]) LANGUAGE plpgsql AS $$
DECLARE
    v_ids uuid[];
BEGIN
    SELECT array_agg(p.id ORDER BY p.id) INTO v_ids
      FROM queen.partitions p
     WHERE p.queue_id = p_queue_id AND p.floor_offset > 0
       AND EXISTS (SELECT FROM queen.log_segments s
                    WHERE s.partition_id = p.id AND s.base_offset < p.floor_offset
                      AND s.base_offset + s.frame_count <= p.floor_offset);
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT g.lead, array_agg(g.id ORDER BY g.id)
      FROM unnest(v_ids, queen.shard_leads(v_ids)) AS g (id, lead)
     GROUP BY g.lead
     ORDER BY g.lead;
END
$$;
