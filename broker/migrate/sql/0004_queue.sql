-- The queue's consumer side: pop (claim and lease), ack (cumulative, with
-- retries and dead letters), each one procedure call per request.

-- Pops for one consumer group: tries the candidate partitions in order
-- (from the broker's hot list, or the one partition the route names), and
-- claims up to p_partitions of them, sharing a budget of p_batch messages.
--
-- A candidate is skipped when its cursor row is locked by a concurrent pop or
-- ack (SKIP LOCKED), holds a live lease, or waits out the retryDelay of a
-- failed batch (lease_expires_at without lease_id). A group's first pop of a partition
-- creates its cursor where the group's subscription starts (named groups
-- only; decided on the group's first pop of the queue). The batch is walked
-- over queen.log_segments from the cursor, skipping the gaps retention
-- leaves, and stops before a segment younger than the queue's
-- delayedProcessing (segment granularity: the frames of one segment were
-- created within microseconds of each other).
--
-- Rows, per candidate in order:
--   'segment' rows (base_offset, frame_count, body, checksum) of a claimed
--   partition, then its 'claimed' row: the batch is [batch_start, batch_end)
--   and retry_at is the lease expiry (NULL with auto-ack);
--   'busy' (retry_at: when the lease expires or the delay passes; NULL when
--   the row was locked), 'empty', or a single 'gone' when the queue is not
--   the tenant's or no longer exists.
-- p_lease_id NULL means auto-ack: the cursor moves past the batch at once.
CREATE FUNCTION queen.pop_v1(
    p_tenant     text,
    p_queue_id   uuid,
    p_candidates uuid[],
    p_group      text,
    p_partitions integer,
    p_batch      integer,
    p_lease_id   uuid,
    p_sub_start  text -- 'all', 'now' or an RFC 3339 time
) RETURNS TABLE (
    partition_id   uuid,
    partition_name text,
    outcome        text,
    retry_at       timestamptz,
    batch_start    bigint,
    batch_end      bigint,
    base_offset    bigint,
    frame_count    integer,
    body           bytea,
    checksum       bigint
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_lease_time integer;
    v_delay      integer;
    v_young      timestamptz := 'infinity';
    v_start      timestamptz;
    v_pid        uuid;
    v_name       text;
    v_next       bigint;
    v_cur        queen.cursors%ROWTYPE;
    v_seg        record;
    v_from       bigint;
    v_end        bigint;
    v_first      bigint;
    v_got        integer;
    v_n          integer;
    v_claimed    integer := 0;
    v_budget     integer := p_batch;
BEGIN
    SELECT q.lease_time, q.delayed_processing INTO v_lease_time, v_delay
      FROM queen.queues q WHERE q.id = p_queue_id AND q.tenant = p_tenant;
    IF NOT FOUND THEN
        outcome := 'gone';
        RETURN NEXT;
        RETURN;
    END IF;
    IF v_delay > 0 THEN
        v_young := now() - make_interval(secs => v_delay);
    END IF;
    -- A pop that leases writes nothing a crash could make wrong: a lost
    -- lease only makes its batch deliverable again, as an expiry would. So
    -- its commit need not wait for the WAL flush (half of a consumer's
    -- round trips). An auto-ack pop moves the cursor and stays durable.
    IF p_lease_id IS NOT NULL THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;

    FOREACH v_pid IN ARRAY p_candidates LOOP
        EXIT WHEN v_claimed >= p_partitions OR v_budget <= 0;
        partition_id := v_pid;
        partition_name := NULL;
        retry_at := NULL;
        batch_start := NULL;
        batch_end := NULL;
        base_offset := NULL;
        frame_count := NULL;
        body := NULL;
        checksum := NULL;

        SELECT p.name, p.next_offset INTO v_name, v_next
          FROM queen.partitions p WHERE p.id = v_pid AND p.queue_id = p_queue_id;
        IF NOT FOUND THEN
            outcome := 'empty';
            RETURN NEXT;
            CONTINUE;
        END IF;

        -- Look before locking: a pop holds the locks it takes until it
        -- commits, and an ack of a leased partition would wait for a pop
        -- that merely found it leased.
        SELECT * INTO v_cur FROM queen.cursors c
         WHERE c.partition_id = v_pid AND c.consumer_group = p_group;
        IF FOUND AND v_cur.lease_expires_at > now() THEN
            outcome := 'busy';
            retry_at := v_cur.lease_expires_at;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF FOUND AND v_cur.committed >= v_next THEN
            outcome := 'empty';
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF FOUND THEN
            SELECT * INTO v_cur FROM queen.cursors c
             WHERE c.partition_id = v_pid AND c.consumer_group = p_group
               FOR UPDATE SKIP LOCKED;
            IF NOT FOUND THEN
                outcome := 'busy'; -- locked by a concurrent pop or ack
                RETURN NEXT;
                CONTINUE;
            END IF;
        ELSE
            v_from := 0;
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
                    SELECT s.base_offset + s.frame_count INTO v_from FROM queen.log_segments s
                     WHERE s.partition_id = v_pid AND s.max_created_at <= v_start
                     ORDER BY s.base_offset DESC LIMIT 1;
                    v_from := COALESCE(v_from, 0);
                END IF;
            END IF;
            INSERT INTO queen.cursors (partition_id, consumer_group, committed)
            VALUES (v_pid, p_group, v_from) ON CONFLICT DO NOTHING;
            SELECT * INTO v_cur FROM queen.cursors c
             WHERE c.partition_id = v_pid AND c.consumer_group = p_group
               FOR UPDATE SKIP LOCKED;
            IF NOT FOUND THEN
                outcome := 'busy';
                RETURN NEXT;
                CONTINUE;
            END IF;
        END IF;

        -- Under the lock, the state may have moved since the look.
        IF v_cur.lease_expires_at > now() THEN
            outcome := 'busy';
            retry_at := v_cur.lease_expires_at;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF v_cur.committed >= v_next THEN
            outcome := 'empty';
            RETURN NEXT;
            CONTINUE;
        END IF;

        -- Walk the segments from the one holding the cursor.
        v_from := v_cur.committed;
        v_end := NULL;
        v_got := 0;
        FOR v_seg IN
            SELECT s.base_offset, s.frame_count, s.max_created_at FROM queen.log_segments s
             WHERE s.partition_id = v_pid
               AND s.base_offset >= COALESCE((SELECT max(s2.base_offset) FROM queen.log_segments s2
                                               WHERE s2.partition_id = v_pid AND s2.base_offset <= v_cur.committed), 0)
             ORDER BY s.base_offset
        LOOP
            CONTINUE WHEN v_seg.base_offset + v_seg.frame_count <= v_from;
            IF v_seg.max_created_at > v_young THEN
                retry_at := v_seg.max_created_at + make_interval(secs => v_delay);
                EXIT;
            END IF;
            IF v_end IS NULL THEN
                v_from := greatest(v_from, v_seg.base_offset); -- skip a retention gap
                v_end := v_from;
                v_first := v_seg.base_offset;
            END IF;
            v_n := least(v_budget - v_got, v_seg.base_offset + v_seg.frame_count - greatest(v_end, v_seg.base_offset));
            v_end := greatest(v_end, v_seg.base_offset) + v_n;
            v_got := v_got + v_n;
            EXIT WHEN v_got >= v_budget;
        END LOOP;

        IF v_end IS NULL THEN
            IF retry_at IS NOT NULL THEN
                outcome := 'busy';
            ELSE
                -- Everything up to next_offset was removed by retention.
                UPDATE queen.cursors c SET committed = v_next
                 WHERE c.partition_id = v_pid AND c.consumer_group = p_group;
                outcome := 'empty';
            END IF;
            RETURN NEXT;
            CONTINUE;
        END IF;

        RETURN QUERY SELECT v_pid, NULL::text, 'segment'::text, NULL::timestamptz, NULL::bigint, NULL::bigint,
                            s.base_offset, s.frame_count, s.body, s.checksum
                       FROM queen.log_segments s
                      WHERE s.partition_id = v_pid AND s.base_offset >= v_first AND s.base_offset < v_end
                      ORDER BY s.base_offset;

        IF p_lease_id IS NULL THEN
            UPDATE queen.cursors c
               SET committed = v_end, batch_start = v_from, batch_end = v_end, lease_id = NULL,
                   lease_expires_at = NULL, retry_count = 0, total_consumed = c.total_consumed + v_got,
                   last_consumed_at = now()
             WHERE c.partition_id = v_pid AND c.consumer_group = p_group;
            retry_at := NULL;
        ELSE
            retry_at := now() + make_interval(secs => v_lease_time);
            UPDATE queen.cursors c
               SET committed = v_from, batch_start = v_from, batch_end = v_end, lease_id = p_lease_id,
                   lease_expires_at = retry_at
             WHERE c.partition_id = v_pid AND c.consumer_group = p_group;
        END IF;
        partition_name := v_name;
        outcome := 'claimed';
        batch_start := v_from;
        batch_end := v_end;
        base_offset := NULL;
        RETURN NEXT;
        v_claimed := v_claimed + 1;
        v_budget := v_budget - v_got;
    END LOOP;
END
$$;

-- The offset of each transaction id in p_txids among the frames of
-- partition p_partition_id in [p_from, p_to) (the segment holding p_from
-- included whole, so a message just behind p_from is found too), or NULL.
-- The txids array of each segment is what makes this possible without
-- decoding a body.
CREATE FUNCTION queen.txid_offsets_v1(p_partition_id uuid, p_from bigint, p_to bigint, p_txids text[])
RETURNS bigint[] LANGUAGE sql STABLE AS $$
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

-- Acknowledges messages by transaction id, in item order, in one call (the
-- ack and ack/batch routes). Item i names partition p_partition_ids[i], group
-- p_groups[i], transaction p_txids[i], status ('completed', 'failed', 'dlq'
-- or 'retry'), a lease (the zero UUID for none) and an error text for a dead
-- letter ('' for none).
--
-- A message is looked up inside the group's last delivered batch
-- [batch_start, batch_end), by the txids array of the segments there. Acks
-- are cumulative and never move the cursor backwards; a message already
-- behind the cursor answers success without changing anything. Reaching the
-- end of the batch releases the lease at once. 'failed' releases the lease
-- and grows retry_count once per leased batch (later failures of the same
-- released batch change nothing), and the batch is delivered again after the
-- queue's retryDelay; when retry_count has reached the queue's
-- retryLimit the message goes to the dead letters instead and the cursor
-- moves past it. retry_count belongs to the message at the cursor: it
-- resets whenever the cursor moves. 'dlq' sends it there at once; 'retry' only releases.
--
-- A dead letter needs the message's payload, which is inside the compressed
-- body: the first item that needs one without it in p_dlq_* raises SQLSTATE
-- RG001 with DETAIL 'item:partition_id:offset', which rolls everything back;
-- the broker decodes that frame and calls again with it.
--
-- Whenever a release leaves data to deliver, the partition is announced on
-- regent_log, as a push does.
CREATE FUNCTION queen.ack_v1(
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
    dlq            boolean
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
                    PERFORM pg_notify('regent_log', v_qid::text || ':' || v_pid::text);
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
                v_offs := queen.txid_offsets_v1(v_pid, c.batch_start, c.batch_end, p_txids);
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

-- The common case of ack/batch, kept cheap: a consumer acknowledging what it
-- popped, every item 'completed', all on one cursor under one lease (the
-- zero UUID for none). It locks the cursor, finds the offset of each
-- transaction id inside the last batch (NULL when absent), and, when the
-- lease allows it, moves the cursor just past the furthest one found,
-- releasing the lease at the end of the batch. The broker derives each
-- item's answer from this row by the rules of queen.ack_v1 (a test holds the
-- two to the same answers). No row: not the tenant's partition, or no cursor.
CREATE FUNCTION queen.ack_cursor_v1(
    p_tenant       text,
    p_partition_id uuid,
    p_group        text,
    p_lease_id     uuid,
    p_txids        text[]
) RETURNS TABLE (
    queue_id       uuid,
    queue_name     text,
    partition_name text,
    offsets        bigint[],
    committed      bigint,
    batch_end      bigint,
    lease_held     boolean,
    lease_ok       boolean
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    c       queen.cursors%ROWTYPE;
    v_next  bigint;
    v_after bigint;
BEGIN
    SELECT q.id, q.name, p.name, p.next_offset INTO queue_id, queue_name, partition_name, v_next
      FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
     WHERE p.id = p_partition_id AND q.tenant = p_tenant;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO c FROM queen.cursors x
     WHERE x.partition_id = p_partition_id AND x.consumer_group = p_group
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    committed := c.committed;
    batch_end := c.batch_end;
    lease_held := c.lease_id IS NOT NULL;
    lease_ok := p_lease_id = '00000000-0000-0000-0000-000000000000'
                OR COALESCE(p_lease_id = c.lease_id AND c.lease_expires_at > now(), false);
    IF c.batch_end IS NOT NULL THEN
        offsets := queen.txid_offsets_v1(p_partition_id, c.batch_start, c.batch_end, p_txids);
    END IF;
    IF lease_held AND lease_ok THEN
        SELECT max(o) + 1 INTO v_after FROM unnest(offsets) AS o;
        IF v_after > c.committed THEN
            UPDATE queen.cursors x
               SET committed = v_after, total_consumed = x.total_consumed + (v_after - c.committed),
                   retry_count = 0, last_consumed_at = now(),
                   lease_id = CASE WHEN v_after >= c.batch_end THEN NULL ELSE x.lease_id END,
                   lease_expires_at = CASE WHEN v_after >= c.batch_end THEN NULL ELSE x.lease_expires_at END
             WHERE x.partition_id = p_partition_id AND x.consumer_group = p_group;
            IF v_after >= c.batch_end AND v_after < v_next THEN
                PERFORM pg_notify('regent_log', queue_id::text || ':' || p_partition_id::text);
            END IF;
        END IF;
    END IF;
    RETURN NEXT;
END
$$;

-- Generic plans from the first call: planning the acks' statements afresh
-- (PostgreSQL's first five custom plans per connection) costs more than
-- running them.
ALTER FUNCTION queen.pop_v1 SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION queen.ack_v1 SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION queen.ack_cursor_v1 SET plan_cache_mode = force_generic_plan;
