-- The operator's TenantQuota reconcile: writes the tenant's grant, leaving a
-- row that already says the same untouched, and returns how many queries
-- the tenant has registered. max_queries NULL means no cap.
CREATE OR REPLACE FUNCTION queen_streams.quota_apply(p_tenant text, p_enabled boolean, p_max_queries integer)
RETURNS bigint LANGUAGE sql AS $$
    WITH up AS (
        INSERT INTO queen_streams.quota AS g (tenant, enabled, max_queries)
        VALUES (p_tenant, p_enabled, p_max_queries)
        ON CONFLICT (tenant) DO UPDATE
           SET enabled = EXCLUDED.enabled, max_queries = EXCLUDED.max_queries, updated_at = now()
         WHERE (g.enabled, g.max_queries) IS DISTINCT FROM (EXCLUDED.enabled, EXCLUDED.max_queries)
    )
    SELECT count(*) FROM queen_streams.queries WHERE tenant = p_tenant
$$;
