-- Two functions of applied migrations, changed the way a versioned schema
-- changes them: here, not in the files that first created them.
--
-- 0002 and 0004 must stay as they were when they were first applied: the
-- migrator runs each version once, so an edit to them would reach new
-- databases and never the ones already running (where the broker would then
-- call a function that is not there). Brokers of the previous versions keep
-- working while this one rolls out: their functions stay.
--
-- queen.log_push_one_v1 gains p_notify and reports the partition's queue:
-- the streams cycle announces after its commit instead of notifying from
-- inside its transaction (see 0007). It is a new overload beside the nine-
-- argument one of 0002, which brokers of the previous versions call.
--
-- queen.pop_v1 reads the partition and its cursor in one statement before
-- locking, and returns each segment the batch takes while it walks them,
-- reading at most the budget plus one: its generic plan read every segment
-- left in the partition, on every pop.
--
-- queen_streams.cycle_v1 stays as each database has it: the function of
-- 0006, or the procedure that a later form of 0006 made of it, which called
-- the new overload. No broker of this version calls it (it calls cycle_v2).
--
-- Both are written with CREATE OR REPLACE so that a database that already
-- has these definitions (one created while 0002 and 0004 carried them) is
-- left as it is.

-- The allocator, and the only way data enters the log: /api/v1/push and the
-- streams cycle both call it. It takes one segment, already packed by the
-- broker, for one partition, assigns its base offset under the partition
-- row's lock, and stores it.
--
-- p_dedup_txids are the client-supplied transaction ids among the frames (ids
-- the broker made are unique by construction and are not recorded). When any
-- of them is already recorded for the partition nothing is written: the
-- function returns a NULL base offset with the duplicates and their message
-- ids, and the broker repacks the segment without them.
--
-- With p_notify the stored segment is announced on regent_log. A caller that
-- passes false (the streams cycle) must announce queue_id:p_partition_id
-- itself once it has committed.
CREATE OR REPLACE FUNCTION queen.log_push_one_v1(
    p_partition_id   uuid,
    p_frame_count    integer,
    p_body           bytea,
    p_checksum       bigint,
    p_txids          text[],
    p_min_created_at timestamptz,
    p_max_created_at timestamptz,
    p_dedup_txids    text[],
    p_dedup_msg_ids  uuid[],
    p_notify         boolean,
    OUT base_offset     bigint,
    OUT dup_txids       text[],
    OUT dup_message_ids uuid[],
    OUT queue_id        uuid
) LANGUAGE plpgsql AS $$
BEGIN
    IF cardinality(p_dedup_txids) > 0 THEN
        SELECT p.queue_id INTO queue_id FROM queen.partitions p WHERE p.id = p_partition_id FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'partition not found' USING ERRCODE = 'P0002';
        END IF;
        SELECT array_agg(d.transaction_id), array_agg(d.message_id)
          INTO dup_txids, dup_message_ids
          FROM queen.push_dedup d
         WHERE d.partition_id = p_partition_id
           AND d.transaction_id = ANY (p_dedup_txids);
        IF dup_txids IS NOT NULL THEN
            RETURN;
        END IF;
    END IF;

    UPDATE queen.partitions p
       SET next_offset = p.next_offset + p_frame_count,
           last_push_at = p_max_created_at
     WHERE p.id = p_partition_id
    RETURNING p.next_offset - p_frame_count, p.queue_id INTO base_offset, queue_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'partition not found' USING ERRCODE = 'P0002';
    END IF;

    INSERT INTO queen.log_segments
        (partition_id, base_offset, frame_count, body, checksum, txids, min_created_at, max_created_at)
    VALUES
        (p_partition_id, base_offset, p_frame_count, p_body, p_checksum, p_txids, p_min_created_at, p_max_created_at);

    IF cardinality(p_dedup_txids) > 0 THEN
        INSERT INTO queen.push_dedup (partition_id, transaction_id, message_id)
        SELECT p_partition_id, t, m FROM unnest(p_dedup_txids, p_dedup_msg_ids) AS u (t, m);
    END IF;

    -- Every replica LISTENs on this channel to keep its hot list and wake
    -- parked pops; NOTIFY is delivered only if the transaction commits.
    IF p_notify THEN
        PERFORM pg_notify('regent_log', queue_id::text || ':' || p_partition_id::text);
    END IF;
END
$$;

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
CREATE OR REPLACE FUNCTION queen.pop_v1(
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
    v_has_cur    boolean;
    v_expires    timestamptz;
    v_committed  bigint;
    v_cur        queen.cursors%ROWTYPE;
    v_seg        record;
    v_from       bigint;
    v_end        bigint;
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

        -- Look before locking: a pop holds the locks it takes until it
        -- commits, and an ack of a leased partition would wait for a pop
        -- that merely found it leased. One statement reads the partition
        -- and the cursor.
        SELECT p.name, p.next_offset, c.partition_id IS NOT NULL, c.lease_expires_at, c.committed
          INTO v_name, v_next, v_has_cur, v_expires, v_committed
          FROM queen.partitions p
          LEFT JOIN queen.cursors c ON c.partition_id = p.id AND c.consumer_group = p_group
         WHERE p.id = v_pid AND p.queue_id = p_queue_id;
        IF NOT FOUND THEN
            outcome := 'empty';
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF v_has_cur AND v_expires > now() THEN
            outcome := 'busy';
            retry_at := v_expires;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF v_has_cur AND v_committed >= v_next THEN
            outcome := 'empty';
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF v_has_cur THEN
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

        -- Walk the segments from the one holding the cursor, returning
        -- each one the batch takes as its 'segment' row. Every segment but
        -- the first adds at least one frame, so the batch needs at most
        -- v_budget + 1 of them; the LIMIT says so to the planner, whose
        -- generic plan otherwise read every segment left in the partition
        -- and sorted them (a bitmap scan), on every pop.
        v_from := v_cur.committed;
        v_end := NULL;
        v_got := 0;
        outcome := 'segment';
        FOR v_seg IN
            SELECT s.base_offset, s.frame_count, s.max_created_at, s.body, s.checksum FROM queen.log_segments s
             WHERE s.partition_id = v_pid
               AND s.base_offset >= COALESCE((SELECT max(s2.base_offset) FROM queen.log_segments s2
                                               WHERE s2.partition_id = v_pid AND s2.base_offset <= v_cur.committed), 0)
             ORDER BY s.base_offset
             LIMIT v_budget + 1
        LOOP
            CONTINUE WHEN v_seg.base_offset + v_seg.frame_count <= v_from;
            IF v_seg.max_created_at > v_young THEN
                retry_at := v_seg.max_created_at + make_interval(secs => v_delay);
                EXIT;
            END IF;
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
        base_offset := NULL;
        frame_count := NULL;
        body := NULL;
        checksum := NULL;

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
        RETURN NEXT;
        v_claimed := v_claimed + 1;
        v_budget := v_budget - v_got;
    END LOOP;
END
$$;

-- CREATE OR REPLACE resets a function's settings: as in 0004, generic plans
-- from the first call.
ALTER FUNCTION queen.pop_v1 SET plan_cache_mode = force_generic_plan;
