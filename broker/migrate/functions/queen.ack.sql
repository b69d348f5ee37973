-- TODO header
CREATE OR REPLACE FUNCTION queen.ack(
    p_tenant           text,
    p_partition_ids    uuid[],
    p_groups           text[],
    p_txids            text[],
    p_statuses         text[],
    p_lease_ids        uuid[],
    p_errors           text[],
    p_dlq_items        integer[],
    p_dlq_message_ids  uuid[],
    p_dlq_payloads     bytea[],
    p_dlq_key_ids      bigint[],
    p_dlq_created      timestamptz[]
) RETURNS TABLE (
    item           integer,
    queue_id       uuid,
    success        boolean,
    error          text,
    queue_name     text,
    partition_name text,
    lease_released boolean,
    dlq            boolean,
    announce       boolean
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    n        integer := cardinality(p_partition_ids);
    v_offs   bigint[];
    i        integer;
    o        bigint;
    d        integer;
    c        queen.cursors%ROWTYPE;
    v_pid    uuid;
    v_grp    text;
    v_found  boolean := false;
    v_dirty  boolean := false;
    v_wake   boolean := false;
    v_qid    uuid;
    v_qname  text;
    v_pname  text;
    v_limit  integer;
    v_delay  integer;
    v_next   bigint;
BEGIN
    p_lease_ids := array_replace(p_lease_ids, '00000000-0000-0000-0000-000000000000', NULL);
    -- Lock every cursor involved in one fixed order, so that concurrent
    -- acks over several cursors cannot deadlock.
    PERFORM 1 FROM queen.cursors c
     WHERE (c.partition_id, c.consumer_group) IN
           (SELECT DISTINCT u.p, u.g FROM unnest(p_partition_ids, p_groups) AS u (p, g))
     ORDER BY c.partition_id, c.consumer_group
       FOR UPDATE;

    -- Items of one cursor usually come together: the cursor is read once,
    -- changed in memory and written back when the next item names another
    -- one (or, at i = n + 1, at the end).
    FOR i IN 1 .. n + 1 LOOP
        IF i > n OR v_pid IS DISTINCT FROM p_partition_ids[i] OR v_grp IS DISTINCT FROM p_groups[i] THEN
            IF v_dirty THEN
                UPDATE queen.cursors x
                   SET committed = c.committed, lease_id = c.lease_id, lease_expires_at = c.lease_expires_at,
                       retry_count = c.retry_count, total_consumed = c.total_consumed,
                       last_consumed_at = c.last_consumed_at
                 WHERE x.partition_id = v_pid AND x.consumer_group = v_grp;
                IF v_wake AND c.committed < v_next THEN
                    -- The announce row of the cursor's last item: its
                    -- answer went out already.
                    item := i - 1;
                    queue_id := v_qid;
                    announce := true;
                    RETURN NEXT;
                    announce := false;
                END IF;
            END IF;
            EXIT WHEN i > n;
            v_pid := p_partition_ids[i];
            v_grp := p_groups[i];
            v_dirty := false;
            v_wake := false;
            SELECT q.id, q.name, p.name, q.retry_limit, q.retry_delay, p.next_offset
              INTO v_qid, v_qname, v_pname, v_limit, v_delay, v_next
              FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
             WHERE p.id = v_pid AND q.tenant = p_tenant;
            v_found := FOUND;
            IF v_found THEN
                SELECT * INTO c FROM queen.cursors x WHERE x.partition_id = v_pid AND x.consumer_group = v_grp;
                v_found := FOUND;
            END IF;
            -- Entries of items on other cursors are looked up here too,
            -- and ignored.
            v_offs := NULL;
            IF v_found AND c.batch_end IS NOT NULL THEN
                v_offs := queen.txid_offsets(v_pid, c.batch_start, c.batch_end, p_txids);
            END IF;
        END IF;

        item := i;
        queue_id := v_qid;
        success := false;
        error := NULL;
        queue_name := v_qname;
        partition_name := v_pname;
        lease_released := false;
        dlq := false;
        announce := false;
        o := v_offs[i];
        IF NOT v_found OR o IS NULL THEN
            error := 'Message not found';
            queue_id := NULL;
            queue_name := NULL;
            partition_name := NULL;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF o < c.committed THEN -- already acknowledged
            success := true;
            lease_released := c.lease_id IS NULL;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF p_lease_ids[i] IS NOT NULL
           AND (c.lease_id IS DISTINCT FROM p_lease_ids[i] OR c.lease_expires_at <= now()) THEN
            error := 'Invalid or expired lease';
            RETURN NEXT;
            CONTINUE;
        END IF;

        CASE p_statuses[i]
        WHEN 'completed' THEN
            IF c.lease_id IS NULL THEN -- released by a failure: the batch redelivers whole
                error := 'Invalid or expired lease';
                RETURN NEXT;
                CONTINUE;
            END IF;
            c.total_consumed := c.total_consumed + (o + 1 - c.committed);
            c.committed := o + 1;
            c.retry_count := 0;
            c.last_consumed_at := now();
        WHEN 'retry' THEN
            IF c.lease_id IS NOT NULL THEN
                c.lease_id := NULL;
                c.lease_expires_at := NULL;
                v_wake := true;
            END IF;
        WHEN 'failed', 'dlq' THEN
            IF p_statuses[i] = 'failed' AND c.lease_id IS NULL THEN
                success := true; -- this batch has already failed once
                lease_released := true;
                RETURN NEXT;
                CONTINUE;
            END IF;
            IF p_statuses[i] = 'failed' AND c.retry_count < v_limit THEN
                -- Released, but not deliverable again before retryDelay:
                -- the expiry stays as the time pops wait for.
                c.retry_count := c.retry_count + 1;
                c.lease_id := NULL;
                c.lease_expires_at := now() + make_interval(secs => v_delay / 1000.0);
                v_wake := true;
            ELSE
                d := array_position(p_dlq_items, i);
                IF d IS NULL THEN
                    RAISE EXCEPTION 'dead letter needs its payload' USING
                        ERRCODE = 'RG001', DETAIL = format('%s:%s:%s', i, v_pid, o);
                END IF;
                INSERT INTO queen.dead_letters (message_id, partition_id, consumer_group, transaction_id,
                                                payload, key_id, error_message, retry_count, created_at)
                VALUES (p_dlq_message_ids[d], v_pid, v_grp, p_txids[i], p_dlq_payloads[d], p_dlq_key_ids[d],
                        NULLIF(p_errors[i], ''), c.retry_count, p_dlq_created[d])
                ON CONFLICT DO NOTHING;
                dlq := true;
                c.total_consumed := c.total_consumed + (o + 1 - c.committed);
                c.committed := o + 1;
                c.retry_count := 0;
                c.last_consumed_at := now();
                IF p_statuses[i] = 'failed' THEN
                    c.lease_id := NULL;
                    c.lease_expires_at := NULL;
                    v_wake := true;
                END IF;
            END IF;
        END CASE;
        IF c.lease_id IS NOT NULL AND c.committed >= c.batch_end THEN
            c.lease_id := NULL; -- the whole batch is done: release at once
            c.lease_expires_at := NULL;
            v_wake := true;
        END IF;
        v_dirty := true;
        success := true;
        lease_released := c.lease_id IS NULL;
        RETURN NEXT;
    END LOOP;
END
$$;
ALTER FUNCTION queen.ack SET plan_cache_mode = force_generic_plan;
