-- A committed cycle's table rows (queen_streams.cycle_v6): p_rows, a JSON
-- array of objects, one row each, written to the query's table sink in
-- the cycle's transaction, under its (query, partition) lock. Their
-- columns are the first row's keys; the table is the query's sink_table
-- in its tenant's schema (queen_streams.tenant_schema), and every
-- identifier is quoted (format's %I). In mode upsert a row replaces the
-- one of the same key columns (the last of a key, when the cycle carries
-- the key twice); in mode append every row is a new one. A row that does
-- not fit the table refuses the cycle (streams.sink_rows); a query without
-- a table sink refuses rows (streams.no_sink_table). The (query,
-- partition)'s sink_writes row records the write.
CREATE OR REPLACE FUNCTION queen_streams.cycle_table(r queen_streams.cycle_request, p_rows jsonb)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_table  text;
    v_keys   text[];
    v_mode   text;
    v_schema text;
    v_cols   text[];
    v_list   text;
    v_set    text;
    v_n      bigint;
BEGIN
    SELECT q.sink_table, q.sink_keys, q.sink_mode INTO v_table, v_keys, v_mode
      FROM queen_streams.queries q WHERE q.id = r.query_id;
    IF v_table IS NULL THEN
        RAISE EXCEPTION 'table_rows: the query has no table sink (register it with sink_table)'
            USING DETAIL = 'streams.no_sink_table';
    END IF;
    IF EXISTS (SELECT FROM jsonb_array_elements(p_rows) e WHERE jsonb_typeof(e) <> 'object') THEN
        RAISE EXCEPTION 'table_rows: each row is an object of column names and values' USING DETAIL = 'streams.sink_rows';
    END IF;
    v_schema := queen_streams.tenant_schema(r.tenant, NULL);
    SELECT array_agg(k ORDER BY k) INTO v_cols FROM jsonb_object_keys(p_rows -> 0) k;
    IF v_cols IS NULL OR EXISTS (SELECT FROM unnest(v_cols) c WHERE octet_length(c) > 63) THEN
        -- PostgreSQL would cut a longer name to another column's.
        RAISE EXCEPTION 'table_rows: a row names its columns, each of at most 63 bytes' USING DETAIL = 'streams.sink_rows';
    END IF;
    SELECT string_agg(format('%I', c), ', ') INTO v_list FROM unnest(v_cols) c;
    BEGIN
        IF v_mode = 'upsert' THEN
            SELECT string_agg(format('%1$I = EXCLUDED.%1$I', c), ', ') INTO v_set
              FROM unnest(v_cols) c WHERE c <> ALL (v_keys);
            EXECUTE format(
                'INSERT INTO %1$I.%2$I (%3$s) SELECT %3$s FROM ('
                '  SELECT DISTINCT ON (%4$s) x.* FROM jsonb_array_elements($1) WITH ORDINALITY AS e (v, n)'
                '  CROSS JOIN LATERAL jsonb_populate_record(NULL::%1$I.%2$I, e.v) AS x ORDER BY %4$s, e.n DESC) s'
                ' ON CONFLICT (%5$s) DO %6$s',
                v_schema, v_table, v_list,
                (SELECT string_agg(format('x.%I', k), ', ') FROM unnest(v_keys) k),
                (SELECT string_agg(format('%I', k), ', ') FROM unnest(v_keys) k),
                COALESCE('UPDATE SET ' || v_set, 'NOTHING'))
            USING p_rows;
        ELSE
            EXECUTE format('INSERT INTO %1$I.%2$I (%3$s) SELECT %3$s FROM jsonb_populate_recordset(NULL::%1$I.%2$I, $1)',
                           v_schema, v_table, v_list)
            USING p_rows;
        END IF;
        GET DIAGNOSTICS v_n = ROW_COUNT;
    EXCEPTION
        WHEN data_exception OR integrity_constraint_violation OR undefined_table OR undefined_column
          OR datatype_mismatch OR cardinality_violation OR wrong_object_type OR insufficient_privilege THEN
            RAISE EXCEPTION 'table_rows: the rows do not fit table %.%: %', quote_ident(v_schema), quote_ident(v_table), SQLERRM
                USING DETAIL = 'streams.sink_rows';
    END;
    INSERT INTO queen_streams.sink_writes AS w (query_id, partition_id, rows, written_at)
    VALUES (r.query_id, r.partition_id, v_n, now())
    ON CONFLICT (query_id, partition_id) DO UPDATE SET rows = w.rows + EXCLUDED.rows, written_at = EXCLUDED.written_at;
END
$$;
