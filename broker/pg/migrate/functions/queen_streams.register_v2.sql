-- Query registration in one round trip: the four outcomes of
-- POST /streams/v1/queries, with the tenant quota gate on new names.
--
-- outcome is 'registered' (fresh tells whether the row is new), 'conflict'
-- (the name exists with another config_hash and no reset was asked for) or
-- 'denied' (a new name the tenant may not register; message says why). A
-- reset deletes the query's state and bumps its reset_generation in the
-- same transaction, after waiting for the query's cycles and keeping them
-- out (queen_streams.query_lock_cycles): a cycle that carries the reset
-- generation its worker registered under (queen_streams.cycle_gate) then
-- either commits before the reset or is refused after it.
-- reset_generation is the query's generation once registered, what a
-- worker registering now sends with its cycles.
CREATE OR REPLACE FUNCTION queen_streams.register_v2(
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
    OUT message   text,
    OUT reset_generation bigint
) LANGUAGE plpgsql AS $$
DECLARE
    v_hash    text;
    v_enabled boolean;
    v_max     integer;
    v_count   bigint;
BEGIN
    fresh := false;
    SELECT q.id, q.config_hash INTO query_id, v_hash
      FROM queen_streams.queries q
     WHERE q.tenant = p_tenant AND q.name = p_name
       FOR UPDATE;

    IF NOT FOUND AND p_tenant <> 'default' THEN
        -- The grant row's lock serialises every new name of the tenant, which
        -- is what makes max_queries an exact cap under racing registrations.
        SELECT g.enabled, g.max_queries INTO v_enabled, v_max
          FROM queen_streams.quota g
         WHERE g.tenant = p_tenant
           FOR UPDATE;
        IF NOT FOUND THEN
            outcome := 'denied';
            message := format('tenant %L has no quota grant for streaming queries', p_tenant);
            RETURN;
        END IF;
        -- The same name may have been registered while this call waited
        -- for the grant; re-registering an existing name always passes.
        SELECT q.id, q.config_hash INTO query_id, v_hash
          FROM queen_streams.queries q
         WHERE q.tenant = p_tenant AND q.name = p_name
           FOR UPDATE;
        IF NOT FOUND THEN
            IF NOT v_enabled THEN
                outcome := 'denied';
                message := format('tenant %L has a disabled quota grant for streaming queries', p_tenant);
                RETURN;
            END IF;
            IF v_max IS NOT NULL THEN
                SELECT count(*) INTO v_count FROM queen_streams.queries q WHERE q.tenant = p_tenant;
                IF v_count >= v_max THEN
                    outcome := 'denied';
                    message := format('tenant %L has reached its quota cap of %s streaming queries', p_tenant, v_max);
                    RETURN;
                END IF;
            END IF;
        END IF;
    END IF;

    IF query_id IS NULL THEN
        INSERT INTO queen_streams.queries AS q (id, tenant, name, source_queue, sink_queue, config_hash)
        VALUES (p_new_id, p_tenant, p_name, p_source, p_sink, p_config_hash)
        ON CONFLICT (tenant, name) DO NOTHING
        RETURNING q.id INTO query_id;
        IF FOUND THEN
            outcome := 'registered';
            fresh := true;
            reset_generation := 0;
            RETURN;
        END IF;
        -- A racing registration of the same name committed first: this
        -- call is now a re-registration of it.
        SELECT q.id, q.config_hash INTO STRICT query_id, v_hash
          FROM queen_streams.queries q
         WHERE q.tenant = p_tenant AND q.name = p_name
           FOR UPDATE;
    END IF;

    IF v_hash <> p_config_hash AND NOT p_reset THEN
        outcome := 'conflict';
        -- The SDKs match the opening phrase (queue-admin-api.md §9); the
        -- operator reports the rest.
        message := format('config_hash mismatch: operator chain changed for queryId ''%s''. '
                          'Pass reset:true to wipe existing state, or use a new queryId. '
                          '(The query is registered with a different config_hash.)', p_name);
        RETURN;
    END IF;
    IF p_reset THEN
        PERFORM queen_streams.query_lock_cycles(p_tenant, register_v2.query_id,
                    (SELECT q.source_queue FROM queen_streams.queries q WHERE q.id = register_v2.query_id));
        DELETE FROM queen_streams.state s WHERE s.query_id = register_v2.query_id;
        DELETE FROM queen_streams.state_rows s WHERE s.query_id = register_v2.query_id;
    END IF;
    UPDATE queen_streams.queries q
       SET source_queue = p_source, sink_queue = p_sink, config_hash = p_config_hash, updated_at = now(),
           reset_generation = q.reset_generation + CASE WHEN p_reset THEN 1 ELSE 0 END
     WHERE q.id = register_v2.query_id
    RETURNING q.reset_generation INTO register_v2.reset_generation;
    outcome := 'registered';
END
$$;
