-- The operator's TenantQuota reconcile: writes the tenant's grant and its
-- limits, leaving a row that already says the same untouched, and returns
-- how many queries the tenant has registered. A NULL limit means none. A
-- changed row is announced on the channel regent_quota, so that every
-- broker re-reads the limits at once (they re-read every second anyway).
-- Succeeds queen_streams.quota_apply, which knew max_queries only.
CREATE OR REPLACE FUNCTION queen_streams.quota_apply_v2(
    p_tenant                   text,
    p_enabled                  boolean,
    p_max_queries              integer,
    p_max_queues               integer,
    p_push_messages_per_second bigint,
    p_push_messages_burst      bigint,
    p_push_bytes_per_second    bigint,
    p_push_bytes_burst         bigint,
    p_pop_messages_per_second  bigint,
    p_max_stored_bytes         bigint,
    p_max_state_rows           bigint
) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO queen_streams.quota AS g (tenant, enabled, max_queries, max_queues,
        push_messages_per_second, push_messages_burst, push_bytes_per_second, push_bytes_burst,
        pop_messages_per_second, max_stored_bytes, max_state_rows)
    VALUES (p_tenant, p_enabled, p_max_queries, p_max_queues,
        p_push_messages_per_second, p_push_messages_burst, p_push_bytes_per_second, p_push_bytes_burst,
        p_pop_messages_per_second, p_max_stored_bytes, p_max_state_rows)
    ON CONFLICT (tenant) DO UPDATE
       SET enabled = EXCLUDED.enabled, max_queries = EXCLUDED.max_queries, max_queues = EXCLUDED.max_queues,
           push_messages_per_second = EXCLUDED.push_messages_per_second,
           push_messages_burst = EXCLUDED.push_messages_burst,
           push_bytes_per_second = EXCLUDED.push_bytes_per_second, push_bytes_burst = EXCLUDED.push_bytes_burst,
           pop_messages_per_second = EXCLUDED.pop_messages_per_second,
           max_stored_bytes = EXCLUDED.max_stored_bytes, max_state_rows = EXCLUDED.max_state_rows,
           updated_at = EXCLUDED.updated_at -- the default, now(): Citus refuses now() here
     WHERE (g.enabled, g.max_queries, g.max_queues, g.push_messages_per_second, g.push_messages_burst,
            g.push_bytes_per_second, g.push_bytes_burst, g.pop_messages_per_second, g.max_stored_bytes,
            g.max_state_rows)
           IS DISTINCT FROM
           (EXCLUDED.enabled, EXCLUDED.max_queries, EXCLUDED.max_queues, EXCLUDED.push_messages_per_second,
            EXCLUDED.push_messages_burst, EXCLUDED.push_bytes_per_second, EXCLUDED.push_bytes_burst,
            EXCLUDED.pop_messages_per_second, EXCLUDED.max_stored_bytes, EXCLUDED.max_state_rows);
    IF FOUND THEN
        -- A changed row starts the rates from full buckets of the new sizes.
        DELETE FROM queen_streams.quota_budget b WHERE b.tenant = p_tenant;
        PERFORM pg_notify('regent_quota', '');
    END IF;
    RETURN (SELECT count(*) FROM queen_streams.queries q WHERE q.tenant = p_tenant);
END
$$;

