-- What one broker saw since its last call, about a second ago: the messages
-- it pushed and popped for each quota'd tenant (parallel arrays), added to
-- the current 10-second bucket of queen_streams.quota_meter, and the limits
-- that refused a tenant (parallel arrays too), stamped now in
-- queen_streams.quota_refusals. Buckets older than two minutes go. Tenants
-- whose quota row is gone are skipped.
-- PL/pgSQL, not SQL: Citus refuses a SQL function over its tables that runs
-- with parameters (CITUS.md).
CREATE OR REPLACE FUNCTION queen_streams.quota_record(
    p_tenants         text[],
    p_pushed          bigint[],
    p_popped          bigint[],
    p_refused_tenants text[],
    p_refused_quotas  text[]
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO queen_streams.quota_meter AS m (tenant, bucket, pushed, popped)
    SELECT u.tenant, date_bin('10 seconds', now(), 'epoch'), u.pushed, u.popped
      FROM unnest(p_tenants, p_pushed, p_popped) AS u (tenant, pushed, popped)
     WHERE EXISTS (SELECT FROM queen_streams.quota g WHERE g.tenant = u.tenant)
     ORDER BY u.tenant
    ON CONFLICT (tenant, bucket) DO UPDATE SET pushed = m.pushed + EXCLUDED.pushed, popped = m.popped + EXCLUDED.popped;
    DELETE FROM queen_streams.quota_meter m
     WHERE m.tenant = ANY (p_tenants) AND m.bucket < now() - interval '2 minutes';
    INSERT INTO queen_streams.quota_refusals AS r (tenant, quota, refused_at)
    SELECT u.tenant, u.quota, now()
      FROM unnest(p_refused_tenants, p_refused_quotas) AS u (tenant, quota)
     WHERE EXISTS (SELECT FROM queen_streams.quota g WHERE g.tenant = u.tenant)
     ORDER BY u.tenant, u.quota
    ON CONFLICT (tenant, quota) DO UPDATE SET refused_at = EXCLUDED.refused_at;
END
$$;
