--
-- Name: queen; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA queen;

--
-- Name: queen_streams; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA queen_streams;

--
-- Name: ack(text, uuid[], text[], text[], text[], uuid[], text[], integer[], uuid[], bytea[], bigint[], timestamp with time zone[]); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.ack(p_tenant text, p_partition_ids uuid[], p_groups text[], p_txids text[], p_statuses text[], p_lease_ids uuid[], p_errors text[], p_dlq_items integer[], p_dlq_message_ids uuid[], p_dlq_payloads bytea[], p_dlq_key_ids bigint[], p_dlq_created timestamp with time zone[]) RETURNS TABLE(item integer, queue_id uuid, success boolean, error text, queue_name text, partition_name text, lease_released boolean, dlq boolean, announce boolean, frame_offset bigint, segment_base bigint, segment_frames integer, segment_body bytea, segment_checksum bigint)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
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
BEGIN
    p_lease_ids := array_replace(p_lease_ids, '00000000-0000-0000-0000-000000000000', NULL);
    -- Lock in one fixed order, so that concurrent acks over several cursors
    -- cannot deadlock.
    SELECT array_agg(x.c), array_agg((x.c).partition_id || ' ' || (x.c).consumer_group), array_agg(false)
      INTO v_cursors, v_keys, v_dirty
      FROM (SELECT c FROM queen.cursors c
             WHERE (c.partition_id, c.consumer_group) IN (SELECT * FROM unnest(p_partition_ids, p_groups))
             ORDER BY c.partition_id, c.consumer_group
               FOR UPDATE) x;

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
            v_offs := NULL;
            IF c.batch_end IS NOT NULL THEN
                v_offs := queen.txid_offsets(v_pid, c.batch_start, c.batch_end, p_txids);
            END IF;
        END IF;

        o := v_offs[i];
        v_ok := false;
        v_error := NULL;
        v_dead := false;
        IF o IS NULL THEN
            v_error := 'Message not found';
        ELSIF o < c.committed THEN
            v_ok := true; -- already acknowledged
        ELSIF p_lease_ids[i] IS NOT NULL AND NOT queen.lease_held_by(c.lease_id, c.lease_expires_at, p_lease_ids[i]) THEN
            v_error := 'Invalid or expired lease';
        ELSIF c.lease_id IS NULL AND p_statuses[i] = 'completed' THEN
            v_error := 'Invalid or expired lease';
        ELSIF c.lease_id IS NULL AND p_statuses[i] = 'failed' THEN
            v_ok := true;
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
                    c.lease_id := NULL;
                    c.lease_expires_at := NULL;
                    v_wake := true;
                END IF;
            WHEN p_statuses[i] = 'failed' AND c.retry_count < v_limit THEN
                -- Released, but not deliverable again before retryDelay:
                -- the expiry stays as the time pops wait for.
                c.retry_count := c.retry_count + 1;
                c.lease_id := NULL;
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
                    c.lease_id := NULL;
                    c.lease_expires_at := NULL;
                    v_wake := true;
                END IF;
            END CASE;
            IF c.lease_id IS NOT NULL AND c.committed >= c.batch_end THEN
                c.lease_id := NULL; -- the whole batch is done: release at once
                c.lease_expires_at := NULL;
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
        RETURN QUERY
        SELECT m.i, NULL::uuid, false, NULL::text, NULL::text, NULL::text, false, false, false,
               m.o, s.base_offset, s.frame_count,
               CASE WHEN row_number() OVER (PARTITION BY p_partition_ids[m.i], s.base_offset ORDER BY m.i) = 1
                    THEN s.body END,
               s.checksum
          FROM unnest(m_items, m_offs) AS m (i, o)
          LEFT JOIN LATERAL (
              SELECT g.base_offset, g.frame_count, g.body, g.checksum FROM queen.log_segments g
               WHERE g.partition_id = p_partition_ids[m.i] AND g.base_offset <= m.o
               ORDER BY g.base_offset DESC LIMIT 1) s ON m.o < s.base_offset + s.frame_count
         ORDER BY m.i;
        RETURN;
    END IF;

    IF true = ANY (v_dirty) THEN
        UPDATE queen.cursors x
           SET committed = u.committed, lease_id = u.lease_id, lease_expires_at = u.lease_expires_at,
               retry_count = u.retry_count, total_consumed = u.total_consumed, last_consumed_at = u.last_consumed_at
          FROM unnest(v_cursors) WITH ORDINALITY AS u
         WHERE v_dirty[u.ordinality] AND x.partition_id = u.partition_id AND x.consumer_group = u.consumer_group;
    END IF;
    IF l_items IS NOT NULL THEN
        INSERT INTO queen.dead_letters (message_id, partition_id, consumer_group, transaction_id,
                                        payload, key_id, error_message, retry_count, created_at)
        SELECT p_dlq_message_ids[l.d], p_partition_ids[l.i], p_groups[l.i], p_txids[l.i], p_dlq_payloads[l.d],
               p_dlq_key_ids[l.d], NULLIF(p_errors[l.i], ''), l.r, p_dlq_created[l.d]
          FROM unnest(l_items, l_given, l_retries) AS l (i, d, r)
            ON CONFLICT DO NOTHING;
    END IF;
    RETURN QUERY
    SELECT a.i, a_qid[a.i], a_ok[a.i], a_error[a.i], a_qname[a.i], a_pname[a.i], a_release[a.i], a_dlq[a.i],
           a_wake[a.i], NULL::bigint, NULL::bigint, NULL::integer, NULL::bytea, NULL::bigint
      FROM generate_series(1, n) AS a (i);
END
$$;

--
-- Name: ack_cursor(text, uuid, text, uuid, text[]); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.ack_cursor(p_tenant text, p_partition_id uuid, p_group text, p_lease_id uuid, p_txids text[]) RETURNS TABLE(item integer, queue_id uuid, success boolean, error text, queue_name text, partition_name text, lease_released boolean, dlq boolean, announce boolean)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
#variable_conflict use_column
DECLARE
    v_qid       uuid;
    v_qname     text;
    v_pname     text;
    v_next      bigint;
    v_committed bigint;
    v_start     bigint;
    v_end       bigint;
    v_held      boolean;
    v_moves     boolean; -- the lease is held, and is the one given
    v_offs      bigint[];
    v_after     bigint;
BEGIN
    -- No partition of the tenant, or no cursor: no row, and every item is
    -- 'Message not found', as without a batch.
    SELECT q.id, q.name, p.name, p.next_offset, x.committed, x.batch_start, x.batch_end, x.lease_id IS NOT NULL,
           x.lease_id IS NOT NULL AND (p_lease_id IS NULL OR queen.lease_held_by(x.lease_id, x.lease_expires_at, p_lease_id))
      INTO v_qid, v_qname, v_pname, v_next, v_committed, v_start, v_end, v_held, v_moves
      FROM queen.partitions p
      JOIN queen.queues q ON q.id = p.queue_id
      JOIN queen.cursors x ON x.partition_id = p.id AND x.consumer_group = p_group
     WHERE p.id = p_partition_id AND q.tenant = p_tenant
       FOR UPDATE OF x;
    IF v_end IS NOT NULL THEN
        v_offs := queen.txid_offsets(p_partition_id, v_start, v_end, p_txids);
    END IF;
    IF v_moves THEN
        UPDATE queen.cursors x
           SET committed = a.after, total_consumed = x.total_consumed + (a.after - x.committed),
               retry_count = 0, last_consumed_at = now(),
               lease_id = CASE WHEN a.after >= x.batch_end THEN NULL ELSE x.lease_id END,
               lease_expires_at = CASE WHEN a.after >= x.batch_end THEN NULL ELSE x.lease_expires_at END
          FROM (SELECT max(o) + 1 AS after FROM unnest(v_offs) AS o) a
         WHERE x.partition_id = p_partition_id AND x.consumer_group = p_group AND a.after > x.committed
        RETURNING a.after INTO v_after;
    END IF;
    -- Under the lease every message found succeeds, and the cursor reaches
    -- just past the furthest one so far; without it only those behind the
    -- cursor do, and the cursor stays.
    RETURN QUERY
    SELECT u.i::integer,
           CASE WHEN u.o IS NOT NULL THEN v_qid END,
           u.ok,
           CASE WHEN u.o IS NULL THEN 'Message not found' WHEN NOT u.ok THEN 'Invalid or expired lease' END,
           CASE WHEN u.o IS NOT NULL THEN v_qname END,
           CASE WHEN u.o IS NOT NULL THEN v_pname END,
           r.released,
           false,
           r.released AND coalesce(v_after >= v_end AND v_after < v_next, false)
      FROM (SELECT t.i, v_offs[t.i] AS o,
                   v_offs[t.i] IS NOT NULL AND (v_moves OR v_offs[t.i] < v_committed) AS ok,
                   CASE WHEN v_moves THEN greatest(v_committed, max(v_offs[t.i]) OVER (ORDER BY t.i) + 1)
                        ELSE v_committed END AS reach
              FROM unnest(p_txids) WITH ORDINALITY AS t (txid, i)) u
     CROSS JOIN LATERAL (SELECT u.ok AND (NOT v_held OR u.reach >= v_end) AS released) r
     ORDER BY u.i;
END
$$;

--
-- Name: lease_held_by(uuid, timestamp with time zone, uuid); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.lease_held_by(p_lease_id uuid, p_expires_at timestamp with time zone, p_given uuid) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT coalesce(p_lease_id = p_given, false) AND queen.lease_live(p_expires_at)
$$;

--
-- Name: lease_live(timestamp with time zone); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.lease_live(p_expires_at timestamp with time zone) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT coalesce(p_expires_at > now(), false)
$$;

--
-- Name: log_push(uuid[], integer[], bytea[], bigint[], text[], timestamp with time zone[], timestamp with time zone[], integer[], text[], uuid[]); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.log_push(p_partitions uuid[], p_frames integer[], p_bodies bytea[], p_checksums bigint[], p_txids text[], p_min_at timestamp with time zone[], p_max_at timestamp with time zone[], p_dedups integer[], p_dedup_txids text[], p_dedup_msg_ids uuid[]) RETURNS TABLE(partition_id uuid, outcome text, base_offset bigint, queue_id uuid, dup_txids text[], dup_message_ids uuid[])
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    v_locked     integer;
    v_dedup_pids uuid[] := '{}';
    v_push       record;
    v_t          integer := 0;
    v_d          integer := 0;
BEGIN
    PERFORM FROM queen.partitions p WHERE p.id = ANY (p_partitions) ORDER BY p.id FOR UPDATE;
    GET DIAGNOSTICS v_locked = ROW_COUNT;
    IF v_locked < cardinality(p_partitions) THEN
        RETURN QUERY SELECT g.pid, 'gone'::text, NULL::bigint, NULL::uuid, NULL::text[], NULL::uuid[]
                       FROM unnest(p_partitions) AS g (pid)
                      WHERE NOT EXISTS (SELECT FROM queen.partitions p WHERE p.id = g.pid);
        RETURN;
    END IF;
    IF cardinality(p_dedup_txids) > 0 THEN
        FOR i IN 1 .. cardinality(p_partitions) LOOP
            v_dedup_pids := v_dedup_pids || array_fill(p_partitions[i], ARRAY[p_dedups[i]]);
        END LOOP;
        RETURN QUERY SELECT d.partition_id, 'duplicates'::text, NULL::bigint, NULL::uuid,
                            array_agg(d.transaction_id), array_agg(d.message_id)
                       FROM unnest(v_dedup_pids, p_dedup_txids) AS u (pid, txid)
                       JOIN queen.push_dedup d ON d.partition_id = u.pid AND d.transaction_id = u.txid
                      GROUP BY d.partition_id;
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;

    FOR i IN 1 .. cardinality(p_partitions) LOOP
        v_push := queen.log_push_one_v1(
            p_partition_id   => p_partitions[i],
            p_frame_count    => p_frames[i],
            p_body           => p_bodies[i],
            p_checksum       => p_checksums[i],
            p_txids          => p_txids[v_t + 1 : v_t + p_frames[i]],
            p_min_created_at => p_min_at[i],
            p_max_created_at => p_max_at[i],
            p_dedup_txids    => coalesce(p_dedup_txids[v_d + 1 : v_d + p_dedups[i]], '{}'),
            p_dedup_msg_ids  => coalesce(p_dedup_msg_ids[v_d + 1 : v_d + p_dedups[i]], '{}'));
        IF v_push.outcome <> 'stored' THEN
            -- The checks above, under the same locks, rule this out.
            RAISE EXCEPTION 'segment for partition % was not stored: %', p_partitions[i], v_push.outcome
                USING ERRCODE = 'internal_error';
        END IF;
        partition_id := p_partitions[i];
        outcome := 'stored';
        base_offset := v_push.base_offset;
        queue_id := v_push.queue_id;
        RETURN NEXT;
        v_t := v_t + p_frames[i];
        v_d := v_d + p_dedups[i];
    END LOOP;
END
$$;

--
-- Name: log_push_one_v1(uuid, integer, bytea, bigint, text[], timestamp with time zone, timestamp with time zone, text[], uuid[]); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.log_push_one_v1(p_partition_id uuid, p_frame_count integer, p_body bytea, p_checksum bigint, p_txids text[], p_min_created_at timestamp with time zone, p_max_created_at timestamp with time zone, p_dedup_txids text[], p_dedup_msg_ids uuid[], OUT outcome text, OUT base_offset bigint, OUT dup_txids text[], OUT dup_message_ids uuid[], OUT queue_id uuid) RETURNS record
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF cardinality(p_dedup_txids) > 0 THEN
        SELECT p.queue_id INTO queue_id FROM queen.partitions p WHERE p.id = p_partition_id FOR UPDATE;
        IF NOT FOUND THEN
            outcome := 'gone';
            RETURN;
        END IF;
        SELECT array_agg(d.transaction_id), array_agg(d.message_id)
          INTO dup_txids, dup_message_ids
          FROM queen.push_dedup d
         WHERE d.partition_id = p_partition_id
           AND d.transaction_id = ANY (p_dedup_txids);
        IF dup_txids IS NOT NULL THEN
            outcome := 'duplicates';
            RETURN;
        END IF;
    END IF;

    UPDATE queen.partitions p
       SET next_offset = p.next_offset + p_frame_count,
           last_push_at = p_max_created_at
     WHERE p.id = p_partition_id
    RETURNING p.next_offset - p_frame_count, p.queue_id INTO base_offset, queue_id;
    IF NOT FOUND THEN
        outcome := 'gone';
        RETURN;
    END IF;

    INSERT INTO queen.log_segments
        (partition_id, base_offset, frame_count, body, checksum, txids, min_created_at, max_created_at)
    VALUES
        (p_partition_id, base_offset, p_frame_count, p_body, p_checksum, p_txids, p_min_created_at, p_max_created_at);

    IF cardinality(p_dedup_txids) > 0 THEN
        INSERT INTO queen.push_dedup (partition_id, transaction_id, message_id)
        SELECT p_partition_id, t, m FROM unnest(p_dedup_txids, p_dedup_msg_ids) AS u (t, m);
    END IF;
    outcome := 'stored';
END
$$;

--
-- Name: pop(text, uuid, uuid[], text, integer, integer, uuid, text, bigint); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.pop(p_tenant text, p_queue_id uuid, p_candidates uuid[], p_group text, p_partitions integer, p_batch integer, p_lease_id uuid, p_sub_start text, p_max_bytes bigint) RETURNS TABLE(partition_id uuid, partition_name text, outcome text, retry_at timestamp with time zone, batch_start bigint, batch_end bigint, base_offset bigint, frame_count integer, body bytea, checksum bigint)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
#variable_conflict use_column
DECLARE
    -- The queue's settings with the look at each candidate: its partition
    -- and the group's cursor, read without locking. A pop holds the locks
    -- it takes until it commits, and an ack of a leased partition would
    -- wait for a pop that merely found it leased.
    v_looks CURSOR FOR
        SELECT c.pid, q.lease_time, q.delayed_processing, p.name, p.next_offset,
               cu.partition_id IS NOT NULL AS has_cursor, cu.lease_expires_at, cu.committed
          FROM queen.queues q
         CROSS JOIN unnest(p_candidates) WITH ORDINALITY AS c (pid, ord)
          LEFT JOIN queen.partitions p ON p.id = c.pid AND p.queue_id = q.id
          LEFT JOIN queen.cursors cu ON cu.partition_id = p.id AND cu.consumer_group = p_group
         WHERE q.id = p_queue_id AND q.tenant = p_tenant
         ORDER BY c.ord;
    -- The segments from the one holding offset p_at, at most p_rows of them.
    v_segs CURSOR (p_pid uuid, p_at bigint, p_rows integer) FOR
        SELECT s.base_offset, s.frame_count, s.max_created_at, octet_length(s.body) AS size, s.body, s.checksum
          FROM queen.log_segments s
         WHERE s.partition_id = p_pid
           AND s.base_offset >= COALESCE((SELECT max(s2.base_offset) FROM queen.log_segments s2
                                           WHERE s2.partition_id = p_pid AND s2.base_offset <= p_at), 0)
         ORDER BY s.base_offset
         LIMIT p_rows;
    v_c          record;
    v_any        boolean := false;
    v_young      timestamptz;
    v_start      timestamptz;
    v_committed  bigint;
    v_seg        record;
    v_from       bigint;
    v_end        bigint;
    v_got        integer;
    v_n          integer;
    v_claimed    integer := 0;
    v_budget     integer := p_batch;
    v_bytes      bigint := 0; -- of the segments claimed so far
    v_seg_bytes  bigint;      -- of the segments of this candidate
    v_full       boolean := false;
    v_ignored    text;
BEGIN
    IF p_lease_id IS NOT NULL THEN
        v_ignored := set_config('synchronous_commit', 'off', true);
    END IF;
    OPEN v_looks;
    LOOP
        EXIT WHEN v_claimed >= p_partitions OR v_budget <= 0 OR v_full;
        FETCH v_looks INTO v_c;
        EXIT WHEN NOT FOUND;
        IF NOT v_any THEN
            v_any := true;
            v_young := CASE WHEN v_c.delayed_processing > 0
                            THEN now() - make_interval(secs => v_c.delayed_processing) ELSE 'infinity' END;
        END IF;
        partition_id := v_c.pid;
        partition_name := NULL;
        retry_at := NULL;
        batch_start := NULL;
        batch_end := NULL;
        base_offset := NULL;
        frame_count := NULL;
        body := NULL;
        checksum := NULL;

        IF v_c.next_offset IS NULL THEN
            outcome := 'empty';
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF queen.lease_live(v_c.lease_expires_at) THEN
            outcome := 'busy';
            retry_at := v_c.lease_expires_at;
            RETURN NEXT;
            CONTINUE;
        END IF;
        v_committed := v_c.committed;
        IF NOT v_c.has_cursor THEN
            v_committed := 0;
            IF p_group <> '__QUEUE_MODE__' THEN
                IF v_start IS NULL THEN
                    INSERT INTO queen.subscriptions (queue_id, consumer_group, starts_after)
                    VALUES (p_queue_id, p_group, CASE p_sub_start
                        WHEN 'all' THEN '-infinity'::timestamptz
                        WHEN 'now' THEN now()
                        ELSE p_sub_start::timestamptz END)
                    ON CONFLICT DO NOTHING;
                    SELECT s.starts_after INTO v_start FROM queen.subscriptions s
                     WHERE s.queue_id = p_queue_id AND s.consumer_group = p_group;
                END IF;
                IF v_start > '-infinity' THEN
                    SELECT s.base_offset + s.frame_count INTO v_committed FROM queen.log_segments s
                     WHERE s.partition_id = v_c.pid AND s.max_created_at <= v_start
                     ORDER BY s.base_offset DESC LIMIT 1;
                    v_committed := COALESCE(v_committed, 0);
                END IF;
            END IF;
            INSERT INTO queen.cursors (partition_id, consumer_group, committed)
            VALUES (v_c.pid, p_group, v_committed) ON CONFLICT DO NOTHING;
        END IF;
        IF v_committed >= v_c.next_offset THEN
            outcome := 'empty';
            RETURN NEXT;
            CONTINUE;
        END IF;

        v_from := v_committed;
        v_end := NULL;
        v_got := 0;
        v_seg_bytes := 0;
        outcome := 'segment';
        OPEN v_segs(v_c.pid, v_committed, v_budget + 1);
        LOOP
            FETCH v_segs INTO v_seg;
            EXIT WHEN NOT FOUND;
            CONTINUE WHEN v_seg.base_offset + v_seg.frame_count <= v_from;
            IF v_seg.max_created_at > v_young THEN
                retry_at := v_seg.max_created_at + make_interval(secs => v_c.delayed_processing);
                EXIT;
            END IF;
            IF v_bytes + v_seg_bytes > 0 AND v_bytes + v_seg_bytes + v_seg.size > p_max_bytes THEN
                v_full := true;
                EXIT;
            END IF;
            v_seg_bytes := v_seg_bytes + v_seg.size;
            IF v_end IS NULL THEN
                v_from := greatest(v_from, v_seg.base_offset); -- skip a retention gap
                v_end := v_from;
            END IF;
            v_n := least(v_budget - v_got, v_seg.base_offset + v_seg.frame_count - greatest(v_end, v_seg.base_offset));
            v_end := greatest(v_end, v_seg.base_offset) + v_n;
            v_got := v_got + v_n;
            base_offset := v_seg.base_offset;
            frame_count := v_seg.frame_count;
            body := v_seg.body;
            checksum := v_seg.checksum;
            RETURN NEXT;
            EXIT WHEN v_got >= v_budget;
        END LOOP;
        CLOSE v_segs;
        base_offset := NULL;
        frame_count := NULL;
        body := NULL;
        checksum := NULL;

        IF v_end IS NULL AND v_full THEN
            EXIT; -- the budget is spent: this candidate is left as it was
        END IF;
        IF v_end IS NULL AND retry_at IS NOT NULL THEN
            outcome := 'busy';
            RETURN NEXT;
            CONTINUE;
        END IF;

        -- The claim: the cursor row, locked unless a concurrent pop or ack
        -- holds it, and still as the look saw it.
        IF v_end IS NULL THEN
            -- Everything up to next_offset was removed by retention.
            UPDATE queen.cursors c SET committed = v_c.next_offset
             WHERE c.partition_id = v_c.pid AND c.consumer_group = p_group
               AND c.ctid = (SELECT x.ctid FROM queen.cursors x
                              WHERE x.partition_id = v_c.pid AND x.consumer_group = p_group FOR UPDATE SKIP LOCKED)
               AND c.committed = v_committed AND NOT queen.lease_live(c.lease_expires_at);
            outcome := CASE WHEN FOUND THEN 'empty' ELSE 'busy' END;
            RETURN NEXT;
            CONTINUE;
        ELSIF p_lease_id IS NULL THEN
            UPDATE queen.cursors c
               SET committed = v_end, batch_start = v_from, batch_end = v_end, lease_id = NULL,
                   lease_expires_at = NULL, retry_count = 0, total_consumed = c.total_consumed + v_got,
                   last_consumed_at = now()
             WHERE c.partition_id = v_c.pid AND c.consumer_group = p_group
               AND c.ctid = (SELECT x.ctid FROM queen.cursors x
                              WHERE x.partition_id = v_c.pid AND x.consumer_group = p_group FOR UPDATE SKIP LOCKED)
               AND c.committed = v_committed AND NOT queen.lease_live(c.lease_expires_at);
            retry_at := NULL;
        ELSE
            retry_at := now() + make_interval(secs => v_c.lease_time);
            UPDATE queen.cursors c
               SET committed = v_from, batch_start = v_from, batch_end = v_end, lease_id = p_lease_id,
                   lease_expires_at = retry_at
             WHERE c.partition_id = v_c.pid AND c.consumer_group = p_group
               AND c.ctid = (SELECT x.ctid FROM queen.cursors x
                              WHERE x.partition_id = v_c.pid AND x.consumer_group = p_group FOR UPDATE SKIP LOCKED)
               AND c.committed = v_committed AND NOT queen.lease_live(c.lease_expires_at);
        END IF;
        IF NOT FOUND THEN
            outcome := 'busy'; -- taken or moved since the look: its segments are void
            retry_at := NULL;
            v_full := false; -- nor do its segments count
            RETURN NEXT;
            CONTINUE;
        END IF;
        partition_name := v_c.name;
        outcome := 'claimed';
        batch_start := v_from;
        batch_end := v_end;
        RETURN NEXT;
        v_claimed := v_claimed + 1;
        v_budget := v_budget - v_got;
        v_bytes := v_bytes + v_seg_bytes;
    END LOOP;
    CLOSE v_looks;
    IF NOT v_any AND NOT EXISTS (SELECT FROM queen.queues q WHERE q.id = p_queue_id AND q.tenant = p_tenant) THEN
        outcome := 'gone';
        RETURN NEXT;
    END IF;
END
$$;

--
-- Name: resolve_partition(text, text, text, boolean, uuid, uuid); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.resolve_partition(p_tenant text, p_queue text, p_partition text, p_create boolean, p_new_queue_id uuid, p_new_partition_id uuid, OUT queue_id uuid, OUT partition_id uuid, OUT lease_time integer, OUT retry_limit integer, OUT delayed_processing integer, OUT encryption_enabled boolean) RETURNS SETOF record
    LANGUAGE plpgsql
    AS $$
BEGIN
    SELECT q.id, q.lease_time, q.retry_limit, q.delayed_processing, q.encryption_enabled
      INTO queue_id, lease_time, retry_limit, delayed_processing, encryption_enabled
      FROM queen.queues q WHERE q.tenant = p_tenant AND q.name = p_queue;
    IF NOT FOUND THEN
        IF NOT p_create THEN
            RETURN;
        END IF;
        -- ON CONFLICT waits for a concurrent creator; the next statement
        -- then sees its row.
        INSERT INTO queen.queues (id, tenant, name) VALUES (p_new_queue_id, p_tenant, p_queue)
        ON CONFLICT (tenant, name) DO NOTHING;
        SELECT q.id, q.lease_time, q.retry_limit, q.delayed_processing, q.encryption_enabled
          INTO queue_id, lease_time, retry_limit, delayed_processing, encryption_enabled
          FROM queen.queues q WHERE q.tenant = p_tenant AND q.name = p_queue;
    END IF;
    SELECT p.id INTO partition_id FROM queen.partitions p
     WHERE p.queue_id = resolve_partition.queue_id AND p.name = p_partition;
    IF NOT FOUND THEN
        IF NOT p_create THEN
            RETURN;
        END IF;
        INSERT INTO queen.partitions (id, queue_id, name)
        VALUES (p_new_partition_id, resolve_partition.queue_id, p_partition)
        ON CONFLICT ON CONSTRAINT partitions_queue_id_name_key DO NOTHING;
        SELECT p.id INTO partition_id FROM queen.partitions p
         WHERE p.queue_id = resolve_partition.queue_id AND p.name = p_partition;
    END IF;
    RETURN NEXT;
END
$$;

--
-- Name: txid_offsets(uuid, bigint, bigint, text[]); Type: FUNCTION; Schema: queen; Owner: -
--

CREATE FUNCTION queen.txid_offsets(p_partition_id uuid, p_from bigint, p_to bigint, p_txids text[]) RETURNS bigint[]
    LANGUAGE sql STABLE
    AS $$
    SELECT array_agg(f.off ORDER BY u.i)
      FROM unnest(p_txids) WITH ORDINALITY AS u (t, i)
      LEFT JOIN (
          SELECT t.txid, min(s.base_offset + t.n - 1) AS off
            FROM queen.log_segments s
           CROSS JOIN LATERAL unnest(s.txids) WITH ORDINALITY AS t (txid, n)
           WHERE s.partition_id = p_partition_id
             AND s.base_offset >= COALESCE((SELECT max(s2.base_offset) FROM queen.log_segments s2
                                             WHERE s2.partition_id = p_partition_id AND s2.base_offset <= p_from),
                                           p_from)
             AND s.base_offset < p_to
             AND s.base_offset + t.n - 1 < p_to
           GROUP BY t.txid) f ON f.txid = u.t
$$;

--
-- Name: cycle(text, uuid, uuid, text, text[], jsonb[], text[], uuid[], integer[], bytea[], bigint[], text[], timestamp with time zone[], timestamp with time zone[], integer[], text[], uuid[], boolean, uuid, boolean, bigint, boolean); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.cycle(p_tenant text, p_query_id uuid, p_partition_id uuid, p_group text, p_upsert_keys text[], p_upsert_values jsonb[], p_delete_keys text[], p_seg_partitions uuid[], p_seg_frames integer[], p_seg_bodies bytea[], p_seg_checksums bigint[], p_seg_txids text[], p_seg_min_at timestamp with time zone[], p_seg_max_at timestamp with time zone[], p_seg_dedups integer[], p_dedup_txids text[], p_dedup_msg_ids uuid[], p_ack boolean, p_lease_id uuid, p_ack_ok boolean, p_count bigint, p_release boolean) RETURNS TABLE(outcome text, queue_id uuid, queue_name text, base_offsets bigint[], ack_count bigint, lease_released boolean, announce boolean, partition_id uuid, dup_txids text[], dup_message_ids uuid[])
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    v_cursor queen.cursors%ROWTYPE;
    -- The common ack: a success status, the lease released, a count.
    v_one    boolean := p_ack AND p_ack_ok AND p_release AND p_count IS NOT NULL;
    v_next   bigint;
    v_push   record;
    v_walk   record;
    v_refused boolean := false;
BEGIN
    SELECT o.queue_id, o.queue_name, o.next_offset INTO queue_id, queue_name, v_next
      FROM queen_streams.cycle_owner(p_tenant, p_query_id, p_partition_id) o;

    -- The exactly-once guard. The common ack checks the lease in the UPDATE
    -- that applies it, at the end; every other ack locks the cursor row
    -- here, since its work reads the row. Either way the row is locked from
    -- the check to the commit, so no pop can take the lease in between, and
    -- a refusal rolls back everything the cycle did.
    IF p_ack AND p_lease_id IS NULL THEN
        RAISE EXCEPTION 'invalid lease: the ack carries no leaseId';
    END IF;
    IF p_ack AND NOT v_one THEN
        SELECT * INTO v_cursor FROM queen.cursors c
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group
           FOR UPDATE;
        IF NOT FOUND OR NOT queen.lease_held_by(v_cursor.lease_id, v_cursor.lease_expires_at, p_lease_id) THEN
            PERFORM queen_streams.refuse_lease(p_partition_id, p_group, p_lease_id);
        END IF;
    END IF;

    -- The sink pushes go first: they write nothing when a sink partition
    -- is gone or holds some of the client transaction ids, and those rows
    -- are then the answer.
    base_offsets := '{}';
    IF cardinality(p_seg_partitions) > 0 THEN
        FOR v_push IN
            SELECT * FROM queen.log_push(
                p_partitions => p_seg_partitions, p_frames => p_seg_frames, p_bodies => p_seg_bodies,
                p_checksums => p_seg_checksums, p_txids => p_seg_txids, p_min_at => p_seg_min_at,
                p_max_at => p_seg_max_at, p_dedups => p_seg_dedups, p_dedup_txids => p_dedup_txids,
                p_dedup_msg_ids => p_dedup_msg_ids)
        LOOP
            IF v_push.outcome = 'stored' THEN
                base_offsets := base_offsets || v_push.base_offset;
            ELSE
                v_refused := true;
                RETURN QUERY SELECT v_push.outcome, NULL::uuid, NULL::text, NULL::bigint[], NULL::bigint,
                                    NULL::boolean, NULL::boolean, v_push.partition_id, v_push.dup_txids,
                                    v_push.dup_message_ids;
            END IF;
        END LOOP;
        IF v_refused THEN
            RETURN;
        END IF;
    END IF;

    IF cardinality(p_delete_keys) > 0 THEN
        DELETE FROM queen_streams.state s
         WHERE s.query_id = p_query_id AND s.partition_id = p_partition_id AND s.key = ANY (p_delete_keys);
    END IF;
    IF cardinality(p_upsert_keys) > 0 THEN
        INSERT INTO queen_streams.state AS s (query_id, partition_id, key, value, updated_at)
        SELECT p_query_id, p_partition_id, u.key, u.value, now()
          FROM unnest(p_upsert_keys, p_upsert_values) AS u (key, value)
        ON CONFLICT (query_id, partition_id, key)
        DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at;
    END IF;

    lease_released := false;
    announce := false;
    IF NOT p_ack THEN
        -- no lease work
    ELSIF v_one THEN
        UPDATE queen.cursors c
           SET committed = greatest(c.committed, c.batch_end),
               lease_id = NULL, lease_expires_at = NULL, retry_count = 0,
               total_consumed = c.total_consumed + p_count, last_consumed_at = now()
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group
           AND queen.lease_held_by(c.lease_id, c.lease_expires_at, p_lease_id)
        RETURNING c.committed INTO v_cursor.committed;
        IF NOT FOUND THEN
            PERFORM queen_streams.refuse_lease(p_partition_id, p_group, p_lease_id);
        END IF;
        ack_count := p_count;
        lease_released := true;
    ELSIF NOT p_ack_ok THEN
        -- A nack: the whole batch redelivers.
        UPDATE queen.cursors c
           SET lease_id = NULL, lease_expires_at = NULL
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group;
        ack_count := 0;
        lease_released := true;
    ELSIF p_release THEN
        -- No count: the whole leased batch.
        SELECT w.walked INTO ack_count
          FROM queen_streams.walk_frames(p_partition_id, v_cursor.committed, v_cursor.batch_end,
                                            v_cursor.batch_end - v_cursor.committed) w;
        UPDATE queen.cursors c
           SET committed = greatest(c.committed, c.batch_end),
               lease_id = NULL, lease_expires_at = NULL, retry_count = 0,
               total_consumed = c.total_consumed + ack_count, last_consumed_at = now()
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group;
        v_cursor.committed := greatest(v_cursor.committed, v_cursor.batch_end);
        lease_released := true;
    ELSE
        -- The gate partial ack: committed advances by exactly p_count frames
        -- (the whole batch without a count), walked over the real segments
        -- so that offsets retention removed are skipped; the lease is kept.
        SELECT * INTO v_walk
          FROM queen_streams.walk_frames(p_partition_id, v_cursor.committed, v_cursor.batch_end,
                                            coalesce(p_count, v_cursor.batch_end - v_cursor.committed));
        ack_count := v_walk.walked;
        UPDATE queen.cursors c
           SET committed = v_walk.next_offset, total_consumed = c.total_consumed + ack_count,
               last_consumed_at = now()
         WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group;
    END IF;
    announce := lease_released AND v_next > v_cursor.committed;
    outcome := 'committed';
    RETURN NEXT;
END
$$;

--
-- Name: cycle_owner(text, uuid, uuid); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.cycle_owner(p_tenant text, p_query_id uuid, p_partition_id uuid, OUT queue_id uuid, OUT queue_name text, OUT next_offset bigint) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_query_ok boolean;
BEGIN
    -- One statement takes the lock and reads both; next_offset read here
    -- serves the cycle's announce: a push that lands after this read
    -- announces itself.
    SELECT EXISTS (SELECT FROM queen_streams.queries q WHERE q.id = p_query_id AND q.tenant = p_tenant),
           qu.id, qu.name, pa.next_offset
      INTO v_query_ok, queue_id, queue_name, next_offset
      FROM (SELECT pg_advisory_xact_lock(hashtextextended(p_query_id::text || p_partition_id::text, 0))) AS lock (x)
      LEFT JOIN queen.partitions pa ON pa.id = p_partition_id
      -- The queue by its primary key: as a plain join, the generic plan
      -- read every queue of the tenant through the tenant index.
      LEFT JOIN LATERAL (SELECT q.id, q.name FROM queen.queues q
                          WHERE q.id = pa.queue_id AND q.tenant = p_tenant OFFSET 0) AS qu ON true;
    IF NOT v_query_ok THEN
        RAISE EXCEPTION 'query not found';
    END IF;
    IF queue_id IS NULL THEN
        RAISE EXCEPTION 'partition not found';
    END IF;
END
$$;

--
-- Name: query_count(text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.query_count(p_tenant text) RETURNS bigint
    LANGUAGE sql STABLE
    AS $$
    SELECT count(*) FROM queen_streams.queries WHERE tenant = p_tenant
$$;

--
-- Name: query_delete(text, text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.query_delete(p_tenant text, p_name text) RETURNS boolean
    LANGUAGE sql
    AS $$
    WITH d AS (DELETE FROM queen_streams.queries WHERE tenant = p_tenant AND name = p_name RETURNING 1)
    SELECT EXISTS (SELECT FROM d)
$$;

--
-- Name: query_progress(text, text, text, text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.query_progress(p_tenant text, p_name text, p_group text, p_source text) RETURNS TABLE(lag bigint, state_rows bigint, last_cycle timestamp with time zone, reset_generation bigint)
    LANGUAGE sql STABLE
    AS $$
    SELECT src.lag, st.n, GREATEST(st.last, src.last), q.reset_generation
      FROM queen_streams.queries q
     CROSS JOIN LATERAL (
            SELECT count(*) AS n, max(s.updated_at) AS last
              FROM queen_streams.state s
             WHERE s.query_id = q.id) st
     CROSS JOIN LATERAL (
            SELECT COALESCE(sum(GREATEST(p.next_offset - COALESCE(c.committed, 0), 0)), 0)::bigint AS lag,
                   max(c.last_consumed_at) AS last
              FROM queen.queues qu
              JOIN queen.partitions p ON p.queue_id = qu.id
              LEFT JOIN queen.cursors c ON c.partition_id = p.id AND c.consumer_group = p_group
             WHERE qu.tenant = p_tenant AND qu.name = p_source) src
     WHERE q.tenant = p_tenant AND q.name = p_name
$$;

--
-- Name: query_reset_generation(text, text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.query_reset_generation(p_tenant text, p_name text) RETURNS bigint
    LANGUAGE sql STABLE
    AS $$
    SELECT reset_generation FROM queen_streams.queries WHERE tenant = p_tenant AND name = p_name
$$;

--
-- Name: quota_apply(text, boolean, integer); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.quota_apply(p_tenant text, p_enabled boolean, p_max_queries integer) RETURNS bigint
    LANGUAGE sql
    AS $$
    WITH up AS (
        INSERT INTO queen_streams.quota AS g (tenant, enabled, max_queries)
        VALUES (p_tenant, p_enabled, p_max_queries)
        ON CONFLICT (tenant) DO UPDATE
           SET enabled = EXCLUDED.enabled, max_queries = EXCLUDED.max_queries, updated_at = now()
         WHERE (g.enabled, g.max_queries) IS DISTINCT FROM (EXCLUDED.enabled, EXCLUDED.max_queries)
    )
    SELECT count(*) FROM queen_streams.queries WHERE tenant = p_tenant
$$;

--
-- Name: quota_delete(text); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.quota_delete(p_tenant text) RETURNS void
    LANGUAGE sql
    AS $$
    DELETE FROM queen_streams.quota WHERE tenant = p_tenant
$$;

--
-- Name: refuse_lease(uuid, text, uuid); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.refuse_lease(p_partition_id uuid, p_group text, p_lease_id uuid) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_cursor queen.cursors%ROWTYPE;
BEGIN
    SELECT * INTO v_cursor FROM queen.cursors c
     WHERE c.partition_id = p_partition_id AND c.consumer_group = p_group;
    IF NOT FOUND OR v_cursor.lease_id IS NULL THEN
        RAISE EXCEPTION 'invalid lease: no lease is held on this partition for consumer group %', p_group;
    END IF;
    IF v_cursor.lease_id <> p_lease_id THEN
        RAISE EXCEPTION 'invalid lease: the partition is leased to another worker';
    END IF;
    RAISE EXCEPTION 'invalid lease: the lease expired at %', v_cursor.lease_expires_at;
END
$$;

--
-- Name: register(text, text, text, text, text, boolean, uuid); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.register(p_tenant text, p_name text, p_source text, p_sink text, p_config_hash text, p_reset boolean, p_new_id uuid, OUT outcome text, OUT query_id uuid, OUT fresh boolean, OUT message text) RETURNS record
    LANGUAGE plpgsql
    AS $$
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
        message := format('query %L is registered with a different config_hash; '
                          're-register with "reset": true to discard its state', p_name);
        RETURN;
    END IF;
    IF p_reset THEN
        DELETE FROM queen_streams.state s WHERE s.query_id = register.query_id;
    END IF;
    UPDATE queen_streams.queries q
       SET source_queue = p_source, sink_queue = p_sink, config_hash = p_config_hash, updated_at = now(),
           reset_generation = q.reset_generation + CASE WHEN p_reset THEN 1 ELSE 0 END
     WHERE q.id = register.query_id;
    outcome := 'registered';
END
$$;

--
-- Name: walk_frames(uuid, bigint, bigint, bigint); Type: FUNCTION; Schema: queen_streams; Owner: -
--

CREATE FUNCTION queen_streams.walk_frames(p_partition_id uuid, p_from bigint, p_limit bigint, p_count bigint, OUT next_offset bigint, OUT walked bigint) RETURNS record
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_seg  record;
    v_take bigint;
BEGIN
    next_offset := p_from;
    walked := 0;
    IF p_count <= 0 THEN
        RETURN;
    END IF;
    -- Start at the segment holding p_from (or the first one after it), so
    -- the walk is a range scan of the primary key, not a scan from offset 0.
    FOR v_seg IN
        SELECT s.base_offset, s.frame_count
          FROM queen.log_segments s
         WHERE s.partition_id = p_partition_id
           AND s.base_offset >= coalesce((SELECT max(b.base_offset) FROM queen.log_segments b
                                          WHERE b.partition_id = p_partition_id AND b.base_offset <= p_from), p_from)
           AND s.base_offset < p_limit
         ORDER BY s.base_offset
    LOOP
        CONTINUE WHEN v_seg.base_offset + v_seg.frame_count <= next_offset;
        next_offset := greatest(next_offset, v_seg.base_offset);
        v_take := least(p_count - walked, v_seg.base_offset + v_seg.frame_count - next_offset, p_limit - next_offset);
        next_offset := next_offset + v_take;
        walked := walked + v_take;
        EXIT WHEN walked >= p_count OR next_offset >= p_limit;
    END LOOP;
END
$$;

--
-- Name: cursors; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.cursors (
    partition_id uuid NOT NULL,
    consumer_group text NOT NULL,
    committed bigint DEFAULT 0 NOT NULL,
    batch_start bigint,
    batch_end bigint,
    lease_id uuid,
    lease_expires_at timestamp with time zone,
    retry_count integer DEFAULT 0 NOT NULL,
    total_consumed bigint DEFAULT 0 NOT NULL,
    last_consumed_at timestamp with time zone
);

--
-- Name: dead_letters; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.dead_letters (
    message_id uuid NOT NULL,
    partition_id uuid NOT NULL,
    consumer_group text NOT NULL,
    transaction_id text NOT NULL,
    payload bytea,
    key_id bigint,
    error_message text,
    retry_count integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone NOT NULL,
    failed_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: log_segments; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.log_segments (
    partition_id uuid NOT NULL,
    base_offset bigint NOT NULL,
    frame_count integer NOT NULL,
    body bytea NOT NULL,
    checksum bigint NOT NULL,
    txids text[] NOT NULL,
    min_created_at timestamp with time zone NOT NULL,
    max_created_at timestamp with time zone NOT NULL,
    CONSTRAINT log_segments_frame_count_check CHECK ((frame_count > 0))
)
WITH (toast_tuple_target='8160');
ALTER TABLE ONLY queen.log_segments ALTER COLUMN body SET STORAGE EXTERNAL;

--
-- Name: partitions; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.partitions (
    id uuid NOT NULL,
    queue_id uuid NOT NULL,
    name text NOT NULL,
    next_offset bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_push_at timestamp with time zone
);

--
-- Name: push_dedup; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.push_dedup (
    partition_id uuid NOT NULL,
    transaction_id text NOT NULL,
    message_id uuid NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: queues; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.queues (
    id uuid NOT NULL,
    tenant text DEFAULT 'default'::text NOT NULL,
    name text NOT NULL,
    namespace text,
    task text,
    lease_time integer DEFAULT 300 NOT NULL,
    retry_limit integer DEFAULT 3 NOT NULL,
    retry_delay integer DEFAULT 1000 NOT NULL,
    max_size integer DEFAULT 0 NOT NULL,
    ttl integer DEFAULT 3600 NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    delayed_processing integer DEFAULT 0 NOT NULL,
    window_buffer integer DEFAULT 0 NOT NULL,
    retention_seconds integer DEFAULT 0 NOT NULL,
    completed_retention_seconds integer DEFAULT 0 NOT NULL,
    retention_enabled boolean DEFAULT false NOT NULL,
    encryption_enabled boolean DEFAULT false NOT NULL,
    dead_letter_queue boolean DEFAULT false NOT NULL,
    dlq_after_max_retries boolean DEFAULT false NOT NULL,
    max_wait_time_seconds integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: subscriptions; Type: TABLE; Schema: queen; Owner: -
--

CREATE TABLE queen.subscriptions (
    queue_id uuid NOT NULL,
    consumer_group text NOT NULL,
    starts_after timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: queries; Type: TABLE; Schema: queen_streams; Owner: -
--

CREATE TABLE queen_streams.queries (
    id uuid NOT NULL,
    tenant text DEFAULT 'default'::text NOT NULL,
    name text NOT NULL,
    source_queue text NOT NULL,
    sink_queue text,
    config_hash text NOT NULL,
    reset_generation bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: quota; Type: TABLE; Schema: queen_streams; Owner: -
--

CREATE TABLE queen_streams.quota (
    tenant text NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    max_queries integer,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT quota_max_queries_check CHECK ((max_queries >= 0))
);

--
-- Name: state; Type: TABLE; Schema: queen_streams; Owner: -
--

CREATE TABLE queen_streams.state (
    query_id uuid NOT NULL,
    partition_id uuid NOT NULL,
    key text NOT NULL COLLATE pg_catalog."C",
    value jsonb NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: cursors cursors_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.cursors
    ADD CONSTRAINT cursors_pkey PRIMARY KEY (partition_id, consumer_group);

--
-- Name: dead_letters dead_letters_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.dead_letters
    ADD CONSTRAINT dead_letters_pkey PRIMARY KEY (partition_id, consumer_group, message_id);

--
-- Name: log_segments log_segments_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.log_segments
    ADD CONSTRAINT log_segments_pkey PRIMARY KEY (partition_id, base_offset);

--
-- Name: partitions partitions_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.partitions
    ADD CONSTRAINT partitions_pkey PRIMARY KEY (id);

--
-- Name: partitions partitions_queue_id_name_key; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.partitions
    ADD CONSTRAINT partitions_queue_id_name_key UNIQUE (queue_id, name);

--
-- Name: push_dedup push_dedup_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.push_dedup
    ADD CONSTRAINT push_dedup_pkey PRIMARY KEY (partition_id, transaction_id);

--
-- Name: queues queues_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.queues
    ADD CONSTRAINT queues_pkey PRIMARY KEY (id);

--
-- Name: queues queues_tenant_name_key; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.queues
    ADD CONSTRAINT queues_tenant_name_key UNIQUE (tenant, name);

--
-- Name: subscriptions subscriptions_pkey; Type: CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.subscriptions
    ADD CONSTRAINT subscriptions_pkey PRIMARY KEY (queue_id, consumer_group);

--
-- Name: queries queries_pkey; Type: CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.queries
    ADD CONSTRAINT queries_pkey PRIMARY KEY (id);

--
-- Name: queries queries_tenant_name_key; Type: CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.queries
    ADD CONSTRAINT queries_tenant_name_key UNIQUE (tenant, name);

--
-- Name: quota quota_pkey; Type: CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.quota
    ADD CONSTRAINT quota_pkey PRIMARY KEY (tenant);

--
-- Name: state state_pkey; Type: CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.state
    ADD CONSTRAINT state_pkey PRIMARY KEY (query_id, partition_id, key);

--
-- Name: cursors_lease_idx; Type: INDEX; Schema: queen; Owner: -
--

CREATE INDEX cursors_lease_idx ON queen.cursors USING btree (lease_id) WHERE (lease_id IS NOT NULL);

--
-- Name: dead_letters_failed_idx; Type: INDEX; Schema: queen; Owner: -
--

CREATE INDEX dead_letters_failed_idx ON queen.dead_letters USING btree (failed_at);

--
-- Name: log_segments_time_brin; Type: INDEX; Schema: queen; Owner: -
--

CREATE INDEX log_segments_time_brin ON queen.log_segments USING brin (max_created_at);

--
-- Name: push_dedup_created_brin; Type: INDEX; Schema: queen; Owner: -
--

CREATE INDEX push_dedup_created_brin ON queen.push_dedup USING brin (created_at);

--
-- Name: cursors cursors_partition_id_fkey; Type: FK CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.cursors
    ADD CONSTRAINT cursors_partition_id_fkey FOREIGN KEY (partition_id) REFERENCES queen.partitions(id) ON DELETE CASCADE;

--
-- Name: dead_letters dead_letters_partition_id_fkey; Type: FK CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.dead_letters
    ADD CONSTRAINT dead_letters_partition_id_fkey FOREIGN KEY (partition_id) REFERENCES queen.partitions(id) ON DELETE CASCADE;

--
-- Name: log_segments log_segments_partition_id_fkey; Type: FK CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.log_segments
    ADD CONSTRAINT log_segments_partition_id_fkey FOREIGN KEY (partition_id) REFERENCES queen.partitions(id) ON DELETE CASCADE;

--
-- Name: partitions partitions_queue_id_fkey; Type: FK CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.partitions
    ADD CONSTRAINT partitions_queue_id_fkey FOREIGN KEY (queue_id) REFERENCES queen.queues(id) ON DELETE CASCADE;

--
-- Name: subscriptions subscriptions_queue_id_fkey; Type: FK CONSTRAINT; Schema: queen; Owner: -
--

ALTER TABLE ONLY queen.subscriptions
    ADD CONSTRAINT subscriptions_queue_id_fkey FOREIGN KEY (queue_id) REFERENCES queen.queues(id) ON DELETE CASCADE;

--
-- Name: state state_query_id_fkey; Type: FK CONSTRAINT; Schema: queen_streams; Owner: -
--

ALTER TABLE ONLY queen_streams.state
    ADD CONSTRAINT state_query_id_fkey FOREIGN KEY (query_id) REFERENCES queen_streams.queries(id) ON DELETE CASCADE;
