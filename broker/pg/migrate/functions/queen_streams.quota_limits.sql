-- Every tenant's limits, as each broker keeps them in memory (re-read every
-- second and on a NOTIFY regent_quota), with the stored bytes of the tenants
-- that have maxStoredBytes: a sum of their partitions' counters. The default
-- tenant is never limited, so it is never listed. PL/pgSQL, not SQL: Citus
-- plans no SQL function with parameters over its tables.
CREATE OR REPLACE FUNCTION queen_streams.quota_limits()
RETURNS TABLE (
    tenant                   text,
    push_messages_per_second bigint,
    push_messages_burst      bigint,
    push_bytes_per_second    bigint,
    push_bytes_burst         bigint,
    pop_messages_per_second  bigint,
    max_stored_bytes         bigint,
    stored_bytes             bigint
) LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT g.tenant, g.push_messages_per_second, g.push_messages_burst, g.push_bytes_per_second,
           g.push_bytes_burst, g.pop_messages_per_second, g.max_stored_bytes,
           CASE WHEN g.max_stored_bytes IS NOT NULL THEN coalesce(s.bytes, 0) END
      FROM queen_streams.quota g
      LEFT JOIN (SELECT q.tenant, sum(p.stored_bytes)::bigint AS bytes
                   FROM queen.queues q JOIN queen.partitions p ON p.queue_id = q.id
                  WHERE q.tenant IN (SELECT x.tenant FROM queen_streams.quota x WHERE x.max_stored_bytes IS NOT NULL)
                  GROUP BY q.tenant) s ON s.tenant = g.tenant
     WHERE g.tenant <> 'default';
END
$$;
