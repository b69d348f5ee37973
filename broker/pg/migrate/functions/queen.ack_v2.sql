-- The broker's general ack. Applies acknowledgements in order, for any mix of statuses and cursors,
-- and answers each one by item, its 1-based position (queen.ack_cursor is the
-- common case). The rules, per item:
--   * whether it applies at all is queen.ack_verdict's: a message outside
--     the segments of its cursor's last batch is 'Message not found', one
--     behind the cursor is already acknowledged, a lease given must be the
--     cursor's live lease, and 'completed' needs a held lease;
--   * 'completed' moves the cursor just past the
--     message: a batch that a failure released is delivered again whole;
--   * 'retry' releases the lease, for redelivery at once;
--   * 'failed' releases the lease and counts a retry, and the batch may be
--     delivered again after the queue's retryDelay; a batch already released
--     has failed once, and succeeds; past retryLimit, as always for 'dlq',
--     the message goes to the dead letters and the cursor moves past it
--     ('failed' releasing the lease as well);
--   * reaching the end of the batch releases the lease at once.
-- Every release is queen.lease_release_v2's, which says what becomes of the
-- retry count.
-- announce is set on the last item of each run of items on one cursor that
-- released its lease with data left to deliver: the broker announces it once
-- the transaction has committed.
--
-- A dead letter keeps its payload, which only the broker can decode from the
-- compressed segment. When a dead letter's payload is not among p_dlq_* (by
-- p_dlq_items), the call writes nothing and returns no answers but one row
-- per such item, with frame_offset and the segment that holds it
-- (segment_body only on the first row of each segment; the segment columns
-- are NULL if retention removed it meanwhile, and the next call then finds no
-- message). The broker decodes them all and calls again with the payloads.
-- Nothing is written before the end: the cursors change in memory and are
-- written in one statement, the dead letters in another.
--
-- p_shard names the partition the call is about, the first item's: on
-- Citus it is the distribution argument (migrate's Citus mode distributes
-- the function with queen.partitions), so that the coordinator sends the
-- whole call to the worker holding that partition. An item of a partition
-- on another node is reached from there, in two phases. On PostgreSQL it
-- is unused.
CREATE OR REPLACE FUNCTION queen.ack_v2(
    p_shard            uuid,
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
    item             integer,
    queue_id         uuid,
    success          boolean,
    error            text,
    queue_name       text,
    partition_name   text,
    lease_released   boolean,
    dlq              boolean,
    announce         boolean,
    frame_offset     bigint,
    segment_base     bigint,
    segment_frames   integer,
    segment_body     bytea,
    segment_checksum bigint
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    n         integer := cardinality(p_partition_ids);
    -- Every cursor named, locked and read once, by key (partition id and
    -- group); those an item changed are written back at the end.
    v_cursors queen.cursors[];
    v_keys    text[];
    v_dirty   boolean[];
    k         integer; -- the current run's cursor in v_cursors
    c         queen.cursors%ROWTYPE;
    v_pid     uuid;
    v_grp     text;
    v_wake    boolean;
    v_qid     uuid;
    v_qname   text;
    v_pname   text;
    v_limit   integer;
    v_delay   integer;
    v_next    bigint;
    v_offs    bigint[];
    o         bigint;
    d         integer;
    v_verdict text;
    v_ok      boolean;
    v_error   text;
    v_dead    boolean;
    -- The answers, by item.
    a_qid     uuid[];
    a_ok      boolean[];
    a_error   text[];
    a_qname   text[];
    a_pname   text[];
    a_release boolean[];
    a_dlq     boolean[];
    a_wake    boolean[] := array_fill(false, ARRAY[n]);
    -- The dead letters to write: item, index in p_dlq_*, retries.
    l_items   integer[];
    l_given   integer[];
    l_retries integer[];
    -- The dead letters whose payload is missing: item and offset.
    m_items   integer[];
    m_offs    bigint[];
    v_base    bigint;    -- the segment holding a dead letter
    v_count   integer;
    v_body    bytea;
    v_sum     bigint;
    v_bodies  text[];    -- the segments whose body went, as partition and base
BEGIN
    p_lease_ids := array_replace(p_lease_ids, '00000000-0000-0000-0000-000000000000', NULL);
    -- Lock in one fixed order, so that concurrent acks over several cursors
    -- cannot deadlock.
    -- A statement per cursor, which on Citus runs on its partition's shard
    -- (Citus locks no rows of several shards in one statement), read by its
    -- columns: on Citus a whole row read is of the shard's row type
    -- (CITUS.md).
    FOR v_pid, v_grp IN SELECT DISTINCT u.pid, u.grp FROM unnest(p_partition_ids, p_groups) AS u (pid, grp)
                         ORDER BY u.pid, u.grp LOOP
        SELECT c.* INTO c FROM queen.cursors c
         WHERE c.partition_id = v_pid AND c.consumer_group = v_grp
           FOR UPDATE;
        IF FOUND THEN
            v_cursors := v_cursors || c;
            v_keys := v_keys || (v_pid || ' ' || v_grp);
            v_dirty := v_dirty || false;
        END IF;
    END LOOP;
    v_pid := NULL;
    v_grp := NULL;

    -- Items of one cursor usually come together: a run of them reads the
    -- cursor's partition and offsets once.
    FOR i IN 1 .. n + 1 LOOP
        IF i > n OR v_pid IS DISTINCT FROM p_partition_ids[i] OR v_grp IS DISTINCT FROM p_groups[i] THEN
            IF k IS NOT NULL THEN
                v_cursors[k] := c;
                a_wake[i - 1] := v_wake AND c.committed < v_next;
            END IF;
            EXIT WHEN i > n;
            v_pid := p_partition_ids[i];
            v_grp := p_groups[i];
            v_wake := false;
            SELECT q.id, q.name, p.name, q.retry_limit, q.retry_delay, p.next_offset
              INTO v_qid, v_qname, v_pname, v_limit, v_delay, v_next
              FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
             WHERE p.id = v_pid AND q.tenant = p_tenant;
            k := CASE WHEN FOUND THEN array_position(v_keys, v_pid || ' ' || v_grp) END;
            c := v_cursors[k];
            -- Offsets of items on other cursors are looked up here too, and
            -- ignored.
            -- A statement of its own, not a call of queen.txid_offsets in an
            -- expression, which would be parsed and planned at every call.
            v_offs := NULL;
            IF c.batch_end IS NOT NULL THEN
                SELECT array_agg(r.off ORDER BY r.i) INTO v_offs
                  FROM queen.txid_offset_rows(v_pid, c.batch_start, c.batch_end, p_txids) r;
            END IF;
        END IF;

        o := v_offs[i];
        v_ok := false;
        v_error := NULL;
        v_dead := false;
        v_verdict := queen.ack_verdict(o, c.committed, c.lease_id, c.lease_expires_at, p_statuses[i], p_lease_ids[i]);
        IF v_verdict = 'done' THEN
            v_ok := true;
        ELSIF v_verdict <> 'apply' THEN
            v_error := v_verdict;
        ELSE
            v_ok := true;
            v_dirty[k] := true;
            CASE
            WHEN p_statuses[i] = 'completed' THEN
                c.total_consumed := c.total_consumed + (o + 1 - c.committed);
                c.committed := o + 1;
                c.retry_count := 0;
                c.last_consumed_at := now();
            WHEN p_statuses[i] = 'retry' THEN
                IF c.lease_id IS NOT NULL THEN
                    SELECT r.lease_id, r.lease_expires_at, r.retry_count INTO c.lease_id, c.lease_expires_at, c.retry_count
                      FROM queen.lease_release_v2(c.lease_id, c.lease_expires_at, c.retry_count, true, false) r;
                    v_wake := true;
                END IF;
            WHEN p_statuses[i] = 'failed' AND c.retry_count < v_limit THEN
                -- Released, but not deliverable again before retryDelay:
                -- the expiry stays as the time pops wait for.
                SELECT r.lease_id, r.lease_expires_at, r.retry_count INTO c.lease_id, c.lease_expires_at, c.retry_count
                  FROM queen.lease_release_v2(c.lease_id, c.lease_expires_at, c.retry_count, true, false) r;
                c.retry_count := c.retry_count + 1;
                c.lease_expires_at := now() + make_interval(secs => v_delay / 1000.0);
                v_wake := true;
            ELSE -- a dead letter
                d := array_position(p_dlq_items, i);
                IF d IS NULL THEN
                    m_items := m_items || i;
                    m_offs := m_offs || o;
                ELSE
                    l_items := l_items || i;
                    l_given := l_given || d;
                    l_retries := l_retries || c.retry_count;
                END IF;
                v_dead := true;
                c.total_consumed := c.total_consumed + (o + 1 - c.committed);
                c.committed := o + 1;
                c.retry_count := 0;
                c.last_consumed_at := now();
                IF p_statuses[i] = 'failed' THEN
                    SELECT r.lease_id, r.lease_expires_at, r.retry_count INTO c.lease_id, c.lease_expires_at, c.retry_count
                      FROM queen.lease_release_v2(c.lease_id, c.lease_expires_at, c.retry_count, true, false) r;
                    v_wake := true;
                END IF;
            END CASE;
            IF c.lease_id IS NOT NULL AND c.committed >= c.batch_end THEN
                SELECT r.lease_id, r.lease_expires_at, r.retry_count INTO c.lease_id, c.lease_expires_at, c.retry_count
                  FROM queen.lease_release_v2(c.lease_id, c.lease_expires_at, c.retry_count, true, true) r; -- the whole batch is done: release at once
                v_wake := true;
            END IF;
        END IF;
        a_ok[i] := v_ok;
        a_error[i] := v_error;
        a_release[i] := v_ok AND c.lease_id IS NULL;
        a_dlq[i] := v_dead;
        IF o IS NOT NULL THEN
            a_qid[i] := v_qid;
            a_qname[i] := v_qname;
            a_pname[i] := v_pname;
        END IF;
    END LOOP;

    IF m_items IS NOT NULL THEN
        -- A statement per dead letter, each on its partition's shard on
        -- Citus; a segment's body goes once, with its first item.
        FOR j IN 1 .. cardinality(m_items) LOOP
            SELECT g.base_offset, g.frame_count, g.body, g.checksum INTO v_base, v_count, v_body, v_sum
              FROM queen.log_segments g
             WHERE g.partition_id = p_partition_ids[m_items[j]] AND g.base_offset <= m_offs[j]
             ORDER BY g.base_offset DESC LIMIT 1;
            IF NOT FOUND OR m_offs[j] >= v_base + v_count THEN
                v_base := NULL;
                v_count := NULL;
                v_body := NULL;
                v_sum := NULL;
            ELSIF (p_partition_ids[m_items[j]] || ' ' || v_base) = ANY (v_bodies) THEN
                v_body := NULL;
            ELSE
                v_bodies := v_bodies || (p_partition_ids[m_items[j]] || ' ' || v_base);
            END IF;
            RETURN QUERY SELECT m_items[j], NULL::uuid, false, NULL::text, NULL::text, NULL::text, false, false, false,
                                m_offs[j], v_base, v_count, v_body, v_sum;
        END LOOP;
        RETURN;
    END IF;

    IF true = ANY (v_dirty) THEN
        UPDATE queen.cursors x
           SET committed = u.committed, lease_id = u.lease_id, lease_expires_at = u.lease_expires_at,
               retry_count = u.retry_count, total_consumed = u.total_consumed, last_consumed_at = u.last_consumed_at
          FROM unnest(v_cursors) WITH ORDINALITY AS u
         WHERE v_dirty[u.ordinality] AND x.partition_id = u.partition_id AND x.consumer_group = u.consumer_group;
    END IF;
    -- A statement per dead letter, which are rare: Citus plans no
    -- INSERT ... SELECT that picks from the arguments by a row's values.
    FOR j IN 1 .. coalesce(cardinality(l_items), 0) LOOP
        INSERT INTO queen.dead_letters (message_id, partition_id, consumer_group, transaction_id,
                                        payload, key_id, error_message, retry_count, created_at)
        VALUES (p_dlq_message_ids[l_given[j]], p_partition_ids[l_items[j]], p_groups[l_items[j]], p_txids[l_items[j]],
                p_dlq_payloads[l_given[j]], p_dlq_key_ids[l_given[j]], NULLIF(p_errors[l_items[j]], ''), l_retries[j],
                p_dlq_created[l_given[j]])
            ON CONFLICT DO NOTHING;
    END LOOP;
    RETURN QUERY
    SELECT a.i, a_qid[a.i], a_ok[a.i], a_error[a.i], a_qname[a.i], a_pname[a.i], a_release[a.i], a_dlq[a.i],
           a_wake[a.i], NULL::bigint, NULL::bigint, NULL::integer, NULL::bytea, NULL::bigint
      FROM generate_series(1, n) AS a (i);
END
$$;
ALTER FUNCTION queen.ack_v2 SET plan_cache_mode = force_generic_plan;
