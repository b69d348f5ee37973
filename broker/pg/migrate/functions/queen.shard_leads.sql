-- For each partition id of p_ids, the first of p_ids that lies on the same
-- shard: the distribution argument of one call over the partitions of one
-- shard, which Citus sends whole to the shard's worker, where every
-- statement of the call touches that shard alone (CITUS.md, section 3).
-- The callers group their partitions by it. On PostgreSQL, one shard holds
-- them all: p_ids[1] for each, and one call does the work, in one
-- transaction, as one statement over them all would.
CREATE OR REPLACE FUNCTION queen.shard_leads(p_ids uuid[]) RETURNS uuid[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        RETURN array_fill(p_ids[1], ARRAY[cardinality(p_ids)]);
    END IF;
    -- Planned only here, on Citus: PostgreSQL has no such function.
    RETURN ARRAY(SELECT first_value(u.id) OVER (PARTITION BY get_shard_id_for_distribution_column('queen.partitions', u.id)
                                                ORDER BY u.i)
                   FROM unnest(p_ids) WITH ORDINALITY AS u (id, i)
                  ORDER BY u.i);
END
$$;
