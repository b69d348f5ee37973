-- A cycle's state writes, in one statement: the keys it deletes and the
-- keys it upserts (each key once, in one of the two). Then the shard's row
-- count, which the tenant quota's maxStateRows is checked against
-- (queen_streams.state_rows_add, which raises the refusal and so rolls back
-- the cycle), moves only when keys came or went: a fold that rewrites its
-- keys does no counter work. queen_streams.cycle_rules and cycle_short both
-- write through it.
CREATE OR REPLACE FUNCTION queen_streams.cycle_state(r queen_streams.cycle_request)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_delta bigint;
BEGIN
    IF coalesce(cardinality(r.upsert_keys), 0) + coalesce(cardinality(r.delete_keys), 0) = 0 THEN
        RETURN;
    END IF;
    WITH deleted AS (
        -- The cardinality is a one-time filter: without it, a cycle that
        -- deletes nothing (most folds) still scanned the partition's shard.
        DELETE FROM queen_streams.state s
         WHERE cardinality(r.delete_keys) > 0
           AND s.query_id = r.query_id AND s.partition_id = r.partition_id AND s.key = ANY (r.delete_keys)
        RETURNING 1),
    upserted AS (
        -- xmax is 0 on the rows the upsert inserted, not on those it updated.
        INSERT INTO queen_streams.state AS s (query_id, partition_id, key, value, updated_at)
        SELECT r.query_id, r.partition_id, u.key, u.value, now()
          FROM unnest(r.upsert_keys, r.upsert_values) AS u (key, value)
        ON CONFLICT (query_id, partition_id, key)
        DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at
        RETURNING s.xmax = 0 AS inserted)
    SELECT (SELECT count(*) FILTER (WHERE u.inserted) FROM upserted u) - (SELECT count(*) FROM deleted)
      INTO v_delta;
    IF v_delta <> 0 THEN
        PERFORM queen_streams.state_rows_add(p_tenant => r.tenant, p_query_id => r.query_id,
                                             p_partition_id => r.partition_id, p_delta => v_delta);
    END IF;
END
$$;
