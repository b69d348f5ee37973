-- Where the floors (queen.partitions.floor_offset) of a queue's partitions
-- go for one age limit, the rule that retention and eviction share: the new
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
-- Writes nothing: it returns the partitions whose floors rise, with where
-- each goes (in id order), grouped by shard (queen.shard_leads), a row per
-- group, for queen.raise_floors_v2 to raise, a call per group; on
-- PostgreSQL, one group. This read spans the queue's partitions, so on
-- Citus it runs over the shards: it therefore reads the subscribed groups
-- first (a reference table correlated inside a statement over the shards
-- is refused) and probes each partition with lateral sub-selects that have
-- a FROM. With queen.raise_floors_v2, the successor of queen.raise_floors.
CREATE OR REPLACE FUNCTION queen.floors_to_raise(p_queue_id uuid, p_seconds integer, p_consumed boolean)
RETURNS TABLE (shard uuid, partitions uuid[], floors bigint[]) LANGUAGE plpgsql AS $$
DECLARE
    v_groups text[];
    v_ids    uuid[];
    v_floors bigint[];
BEGIN
    IF p_consumed THEN
        SELECT coalesce(array_agg(s.consumer_group), '{}') INTO v_groups
          FROM queen.subscriptions s WHERE s.queue_id = p_queue_id;
    END IF;
    SELECT array_agg(t.id ORDER BY t.id), array_agg(t.floor ORDER BY t.id) INTO v_ids, v_floors
      FROM (SELECT p.id, p.floor_offset AS was,
                   CASE WHEN p_consumed THEN least(coalesce(young.at, p.next_offset), low.committed)
                        ELSE coalesce(young.at, p.next_offset) END AS floor
              FROM queen.partitions p
              LEFT JOIN LATERAL (SELECT min(c.committed) AS committed FROM queen.cursors c
                                  WHERE c.partition_id = p.id) low ON true
              LEFT JOIN LATERAL (SELECT s.base_offset AS at FROM queen.log_segments s
                                  WHERE s.partition_id = p.id
                                    AND s.base_offset + s.frame_count > p.floor_offset
                                    AND s.base_offset < CASE WHEN p_consumed THEN low.committed ELSE p.next_offset END
                                    AND s.max_created_at >= now() - make_interval(secs => p_seconds)
                                  ORDER BY s.base_offset LIMIT 1) young ON true
             WHERE p.queue_id = p_queue_id
               -- Only partitions holding a segment past the limit can
               -- change: the BRIN index on max_created_at finds them
               -- without a probe per partition.
               AND p.id IN (SELECT s.partition_id FROM queen.log_segments s
                             WHERE s.max_created_at < now() - make_interval(secs => p_seconds))
               -- Every subscribed group has a cursor here: as many of
               -- theirs as there are groups, one cursor per group.
               AND (NOT p_consumed OR (low.committed IS NOT NULL AND cardinality(v_groups) = (
                        SELECT count(*) FROM queen.cursors c
                         WHERE c.partition_id = p.id AND c.consumer_group = ANY (v_groups))))) t
     WHERE t.floor > t.was;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT g.lead, array_agg(g.id ORDER BY g.id), array_agg(g.floor ORDER BY g.id)
      FROM unnest(v_ids, v_floors, queen.shard_leads(v_ids)) AS g (id, floor, lead)
     GROUP BY g.lead
     ORDER BY g.lead;
END
$$;
