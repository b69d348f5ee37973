-- Adds p_delta (the keys a cycle inserted minus those it deleted) to the
-- shard's state row count. A cycle that grows the state of a tenant with
-- maxStateRows passes the cap first: the quota row's lock serialises the
-- tenant's growing cycles, so the cap is exact, and a cycle that would pass
-- it raises a refusal that rolls the whole cycle back. The default tenant is
-- never limited.
CREATE OR REPLACE FUNCTION queen_streams.state_rows_add(
    p_tenant       text,
    p_query_id     uuid,
    p_partition_id uuid,
    p_delta        bigint
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_max  bigint;
    v_rows bigint;
BEGIN
    -- The row is read before it is locked, and only a tenant that sets the
    -- cap locks it: on Citus a row lock of quota, a reference table, is
    -- taken on every node, even when no row matches.
    IF p_delta > 0 AND p_tenant <> 'default'
       AND EXISTS (SELECT FROM queen_streams.quota g WHERE g.tenant = p_tenant AND g.max_state_rows IS NOT NULL) THEN
        SELECT g.max_state_rows INTO v_max FROM queen_streams.quota g
         WHERE g.tenant = p_tenant AND g.max_state_rows IS NOT NULL
           FOR UPDATE;
        IF FOUND THEN
            SELECT coalesce(sum(s.row_count), 0) INTO v_rows
              FROM queen_streams.queries q JOIN queen_streams.state_rows s ON s.query_id = q.id
             WHERE q.tenant = p_tenant;
            IF v_rows + p_delta > v_max THEN
                RAISE EXCEPTION 'quota maxStateRows: the cycle would bring tenant % to % state rows, over its cap of %',
                    p_tenant, v_rows + p_delta, v_max
                    USING DETAIL = 'quota.maxStateRows';
            END IF;
        END IF;
    END IF;
    INSERT INTO queen_streams.state_rows AS s (query_id, partition_id, row_count)
    VALUES (p_query_id, p_partition_id, p_delta)
    ON CONFLICT (query_id, partition_id) DO UPDATE SET row_count = s.row_count + EXCLUDED.row_count;
END
$$;
