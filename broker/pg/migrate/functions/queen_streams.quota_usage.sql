-- A tenant's usage, for its TenantQuota's status: queues, queries, stored
-- bytes and state rows from the counters the push, retention and cycle paths
-- keep (sums over the tenant's partitions and shards, never a scan of the
-- log or the state), the messages pushed and popped per second over the last
-- minute (from the brokers' 10-second buckets), and the limits that refused
-- the tenant within the last p_within.
-- PL/pgSQL, not SQL: Citus refuses a SQL function over its tables that runs
-- with parameters (CITUS.md).
CREATE OR REPLACE FUNCTION queen_streams.quota_usage(p_tenant text, p_within interval)
RETURNS TABLE (
    queues                  bigint,
    queries                 bigint,
    stored_bytes            bigint,
    state_rows              bigint,
    pushed_last_minute      bigint,
    popped_last_minute       bigint,
    refusing                text[]
) LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT (SELECT count(*) FROM queen.queues q WHERE q.tenant = p_tenant),
           (SELECT count(*) FROM queen_streams.queries q WHERE q.tenant = p_tenant),
           (SELECT coalesce(sum(p.stored_bytes), 0)::bigint
              FROM queen.queues q JOIN queen.partitions p ON p.queue_id = q.id WHERE q.tenant = p_tenant),
           (SELECT coalesce(sum(s.row_count), 0)::bigint
              FROM queen_streams.queries q JOIN queen_streams.state_rows s ON s.query_id = q.id
             WHERE q.tenant = p_tenant),
           (SELECT coalesce(sum(m.pushed), 0)::bigint FROM queen_streams.quota_meter m
             WHERE m.tenant = p_tenant AND m.bucket > now() - interval '1 minute'),
           (SELECT coalesce(sum(m.popped), 0)::bigint FROM queen_streams.quota_meter m
             WHERE m.tenant = p_tenant AND m.bucket > now() - interval '1 minute'),
           (SELECT coalesce(array_agg(r.quota ORDER BY r.quota), '{}') FROM queen_streams.quota_refusals r
             WHERE r.tenant = p_tenant AND r.refused_at > now() - p_within);
END
$$;
