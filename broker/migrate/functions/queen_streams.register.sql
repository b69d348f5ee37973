-- The previous registration, kept for one release (migrate.Previous):
-- queen_streams.register_v2 without the reset generation.
CREATE OR REPLACE FUNCTION queen_streams.register(
    p_tenant      text,
    p_name        text,
    p_source      text,
    p_sink        text,
    p_config_hash text,
    p_reset       boolean,
    p_new_id      uuid,
    OUT outcome   text,
    OUT query_id  uuid,
    OUT fresh     boolean,
    OUT message   text
) LANGUAGE sql AS $$
    SELECT r.outcome, r.query_id, r.fresh, r.message
      FROM queen_streams.register_v2(p_tenant, p_name, p_source, p_sink, p_config_hash, p_reset, p_new_id) r
$$;
