-- Query registration with its table sink: queen_streams.register_v2, and
-- the sink when p_sink_set says the registration carries one (p_sink_table
-- NULL: the query has no table sink any more). A registration that does
-- not carry one, as every stock client's, leaves the query's as it is.
-- A table sink that cannot be written is refused
-- (queen_streams.sink_table_check), and nothing is registered. sink_table is the query's table once registered
-- (NULL: none), which tells its workers to send their rows.
CREATE OR REPLACE FUNCTION queen_streams.register_v3(
    p_tenant      text,
    p_name        text,
    p_source      text,
    p_sink        text,
    p_config_hash text,
    p_reset       boolean,
    p_new_id      uuid,
    p_sink_set    boolean,
    p_sink_schema text,
    p_sink_table  text,
    p_sink_keys   text[],
    p_sink_mode   text,
    OUT outcome   text,
    OUT query_id  uuid,
    OUT fresh     boolean,
    OUT message   text,
    OUT reset_generation bigint,
    OUT sink_table text
) LANGUAGE plpgsql AS $$
BEGIN
    IF p_sink_set AND p_sink_table IS NOT NULL THEN
        PERFORM queen_streams.sink_table_check(p_tenant, p_sink_schema, p_sink_table, p_sink_keys, p_sink_mode);
    END IF;
    SELECT r.outcome, r.query_id, r.fresh, r.message, r.reset_generation
      INTO outcome, query_id, fresh, message, reset_generation
      FROM queen_streams.register_v2(p_tenant, p_name, p_source, p_sink, p_config_hash, p_reset, p_new_id) r;
    IF outcome <> 'registered' THEN
        RETURN;
    END IF;
    IF p_sink_set THEN
        UPDATE queen_streams.queries q
           SET sink_table = p_sink_table,
               sink_keys = CASE WHEN p_sink_table IS NULL THEN NULL ELSE COALESCE(p_sink_keys, '{}') END,
               sink_mode = CASE WHEN p_sink_table IS NULL THEN NULL ELSE p_sink_mode END
         WHERE q.id = register_v3.query_id;
        sink_table := p_sink_table;
    ELSE
        SELECT q.sink_table INTO register_v3.sink_table FROM queen_streams.queries q WHERE q.id = register_v3.query_id;
    END IF;
END
$$;
