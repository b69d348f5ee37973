-- Leases up to p_want tokens of a tenant's rate limit p_kind
-- ('push_messages', 'push_bytes' or 'pop_messages') and returns how many it
-- granted, possibly none. The bucket refills at the rate, up to the burst,
-- from the moment of its last lease; every replica takes its slices from the
-- same row, so together they never spend more than burst + rate x time. It
-- returns 0 when the limit no longer exists.
CREATE OR REPLACE FUNCTION queen_streams.quota_lease(p_tenant text, p_kind text, p_want bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_rate    bigint;
    v_burst   bigint;
    v_tokens  double precision;
    v_now     timestamptz := clock_timestamp();
    v_granted bigint;
BEGIN
    SELECT CASE p_kind WHEN 'push_messages' THEN g.push_messages_per_second
                       WHEN 'push_bytes' THEN g.push_bytes_per_second
                       WHEN 'pop_messages' THEN g.pop_messages_per_second END,
           CASE p_kind WHEN 'push_messages' THEN coalesce(g.push_messages_burst, g.push_messages_per_second)
                       WHEN 'push_bytes' THEN coalesce(g.push_bytes_burst, g.push_bytes_per_second)
                       WHEN 'pop_messages' THEN g.pop_messages_per_second END
      INTO v_rate, v_burst
      FROM queen_streams.quota g WHERE g.tenant = p_tenant;
    IF v_rate IS NULL THEN
        RETURN 0;
    END IF;
    INSERT INTO queen_streams.quota_budget AS b (tenant, kind, tokens, refilled_at)
    VALUES (p_tenant, p_kind, v_burst, v_now)
    ON CONFLICT (tenant, kind) DO UPDATE
       SET tokens = least(v_burst::double precision,
                          b.tokens + v_rate * extract(epoch FROM v_now - b.refilled_at)),
           refilled_at = v_now
    RETURNING b.tokens INTO v_tokens;
    v_granted := least(p_want, floor(v_tokens)::bigint);
    IF v_granted > 0 THEN
        UPDATE queen_streams.quota_budget b SET tokens = b.tokens - v_granted
         WHERE b.tenant = p_tenant AND b.kind = p_kind;
    ELSE
        v_granted := 0;
    END IF;
    RETURN v_granted;
END
$$;
