-- Refuses (streams.sink_invalid) a table sink that the tenant's query
-- cannot write: table p_table of the tenant's schema
-- (queen_streams.tenant_schema, which p_schema, when not NULL, must be),
-- with key columns p_keys, in mode p_mode. The table must exist there and
-- hold the key columns, and in mode upsert a unique index on exactly those
-- columns (its primary key, when the operator created it): the rows' ON
-- CONFLICT. The columns the rows carry are the operator's check (the
-- pipeline's output is its to know); a row that does not fit fails its
-- cycle.
CREATE OR REPLACE FUNCTION queen_streams.sink_table_check(
    p_tenant text, p_schema text, p_table text, p_keys text[], p_mode text)
RETURNS void LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_schema  text := queen_streams.tenant_schema(p_tenant, p_schema);
    v_rel     oid;
    v_why     text;
BEGIN
    SELECT c.oid INTO v_rel
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = v_schema AND c.relname = p_table AND c.relkind IN ('r', 'p');
    v_why := CASE
        WHEN p_mode IS NULL OR p_mode NOT IN ('upsert', 'append') THEN
            format('mode %L is neither upsert nor append', p_mode)
        WHEN p_mode = 'upsert' AND COALESCE(cardinality(p_keys), 0) = 0 THEN
            'mode upsert needs key columns: a row replaces the one of the same key columns'
        WHEN cardinality(p_keys) <> (SELECT count(DISTINCT k) FROM unnest(p_keys) k) THEN
            'a key column appears twice in the key columns'
        WHEN v_rel IS NULL THEN
            format('table %I.%I does not exist: create it, or set createTable', v_schema, p_table)
        END;
    IF v_why IS NULL THEN
        SELECT format('table %I.%I has no key column %s', v_schema, p_table, string_agg(format('%I', k), ', ')) INTO v_why
          FROM unnest(p_keys) k
         WHERE NOT EXISTS (SELECT FROM pg_attribute a
                            WHERE a.attrelid = v_rel AND a.attname = k AND a.attnum > 0 AND NOT a.attisdropped)
        HAVING count(*) > 0;
    END IF;
    IF v_why IS NULL AND p_mode = 'upsert' AND NOT EXISTS (
        SELECT FROM pg_index i
         WHERE i.indrelid = v_rel AND i.indisunique AND i.indisvalid AND i.indpred IS NULL AND i.indexprs IS NULL
           AND i.indnatts = i.indnkeyatts
           AND (SELECT array_agg(a.attname::text COLLATE "C" ORDER BY a.attname::text COLLATE "C")
                  FROM pg_attribute a
                 WHERE a.attrelid = v_rel AND a.attnum = ANY (i.indkey::int2[]))
               = (SELECT array_agg(k COLLATE "C" ORDER BY k COLLATE "C") FROM unnest(p_keys) k)) THEN
        v_why := format('table %I.%I has no unique index on exactly its key columns (%s), which mode upsert needs',
                        v_schema, p_table, (SELECT string_agg(format('%I', k), ', ') FROM unnest(p_keys) k));
    END IF;
    IF v_why IS NOT NULL THEN
        RAISE EXCEPTION '%', v_why USING DETAIL = 'streams.sink_invalid';
    END IF;
END
$$;
