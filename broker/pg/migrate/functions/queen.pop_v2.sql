-- The broker's pop. Pops for one consumer group: tries the candidate
-- partitions in order (from the broker's hot list, or the one partition
-- the route names), and claims up to p_partitions of them, sharing a
-- budget of p_batch messages and of p_max_bytes segment bytes.
--
-- A candidate is skipped when its cursor row is locked by a concurrent pop
-- or ack (SKIP LOCKED), holds a live lease (queen.lease_live), or waits out
-- the retryDelay of a failed batch (an expiry without a lease id), or is
-- held by the queue's windowBuffer: its newest message is younger than that,
-- whatever the cursor (retry_at: when the window ends). A group's
-- first pop of a partition creates its cursor where the group's
-- subscription starts (named groups only; decided on the group's first pop
-- of the queue). The batch is walked over queen.log_segments from the
-- cursor, or from the partition's floor when that is higher (below it,
-- retention or eviction deleted the messages), skipping the gaps retention
-- leaves, and stops before a segment
-- younger than the queue's delayedProcessing (segment granularity: the
-- frames of one segment were created within microseconds of each other).
--
-- The byte budget counts the stored (compressed) bodies, the bytes that
-- this call reads and the broker holds, and whole segments: a segment is
-- taken only if it fits, except the first of the call, so that a pop always
-- delivers something. The batch ends where the walk stopped, so the lease
-- (or the auto-acked cursor) covers exactly what is delivered and the rest
-- stays free for the next pop. Cutting inside a segment would need its
-- frames' sizes, which only decoding it tells.
--
-- The group of a suspended streaming query (streams.<name>, whose
-- queen_streams.queries row says suspended) looks at no candidate: the
-- answer is no rows, as for a pop that found nothing, no lease is taken and
-- the broker settles no candidate, so that the hot list is as it was when
-- the query resumes. The check is a probe of the queries' unique index in
-- the statement that reads the queue's settings, once per call.
--
-- Rows, per candidate in order:
--   'segment' rows (base_offset, frame_count, body, checksum) of a partition
--   it is claiming, then its 'claimed' row: the batch is [batch_start,
--   batch_end) and retry_at is the lease expiry (NULL with auto-ack); or
--   'busy' (retry_at: when the lease expires or the delay passes; NULL when
--   the row was locked), which voids the 'segment' rows before it; or
--   'empty'; or a single 'gone' when the queue is not the tenant's or no
--   longer exists.
-- p_lease_id NULL means auto-ack: the cursor moves past the batch at once.
--
-- The queue's settings once, then three statements a candidate, because a
-- statement's start-up and end cost more than the rows a pop reads: the
-- look (its partition and cursor: on Citus a statement on one partition,
-- which runs on its shard), the walk over the segments it needs and no
-- more, and the claim, which locks and moves the cursor in one UPDATE on
-- condition that it is still as the look saw it.
--
-- p_shard names the partition the call is about, the first candidate: on
-- Citus it is the distribution argument (migrate's Citus mode distributes
-- the function with queen.partitions), so that the coordinator sends the
-- whole call to the worker holding that partition, which runs it next to
-- its rows. A later candidate on another node is reached from there: a pop
-- whose first candidate was busy or empty pays that hop (CITUS.md). On
-- PostgreSQL it is unused.
CREATE OR REPLACE FUNCTION queen.pop_v2(
    p_shard      uuid,
    p_tenant     text,
    p_queue_id   uuid,
    p_candidates uuid[],
    p_group      text,
    p_partitions integer,
    p_batch      integer,
    p_lease_id   uuid,
    p_sub_start  text, -- 'all', 'now' or an RFC 3339 time
    p_max_bytes  bigint
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
    v_q          record; -- the queue's settings
    v_pid        uuid;
    -- The segments from the one holding offset p_at, at most p_rows of them.
    v_segs CURSOR (p_pid uuid, p_at bigint, p_rows integer) FOR
        SELECT s.base_offset, s.frame_count, s.max_created_at, octet_length(s.body) AS size, s.body, s.checksum
          FROM queen.log_segments s
         WHERE s.partition_id = p_pid
           AND s.base_offset >= COALESCE((SELECT max(s2.base_offset) FROM queen.log_segments s2
                                           WHERE s2.partition_id = p_pid AND s2.base_offset <= p_at), 0)
         ORDER BY s.base_offset
         LIMIT p_rows;
    -- The look at a candidate: its partition and the group's cursor, read
    -- without locking. A pop holds the locks it takes until it commits, and
    -- an ack of a leased partition would wait for a pop that merely found
    -- it leased.
    v_c          record;
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
    SELECT q.lease_time, q.delayed_processing, q.window_buffer INTO v_q
      FROM queen.queues q
     WHERE q.id = p_queue_id AND q.tenant = p_tenant
       AND NOT EXISTS (SELECT FROM queen_streams.queries sq
                        WHERE starts_with(p_group, 'streams.') AND sq.tenant = p_tenant
                          AND sq.name = substr(p_group, 9) AND sq.suspended);
    IF NOT FOUND THEN
        IF NOT EXISTS (SELECT FROM queen.queues q WHERE q.id = p_queue_id AND q.tenant = p_tenant) THEN
            outcome := 'gone';
            RETURN NEXT;
        END IF;
        RETURN;
    END IF;
    v_young := CASE WHEN v_q.delayed_processing > 0
                    THEN now() - make_interval(secs => v_q.delayed_processing) ELSE 'infinity' END;
    FOREACH v_pid IN ARRAY coalesce(p_candidates, '{}') LOOP
        EXIT WHEN v_claimed >= p_partitions OR v_budget <= 0 OR v_full;
        SELECT p.name, p.next_offset, p.floor_offset, p.last_push_at, cu.partition_id IS NOT NULL AS has_cursor,
               cu.lease_expires_at, cu.committed
          INTO v_c
          FROM queen.partitions p
          LEFT JOIN queen.cursors cu ON cu.partition_id = p.id AND cu.consumer_group = p_group
         WHERE p.id = v_pid AND p.queue_id = p_queue_id;
        partition_id := v_pid;
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
                    -- Read before it is written: on Citus the subscriptions
                    -- are a reference table, whose every write, even one
                    -- that conflicts, goes to every node.
                    SELECT s.starts_after INTO v_start FROM queen.subscriptions s
                     WHERE s.queue_id = p_queue_id AND s.consumer_group = p_group;
                END IF;
                IF v_start IS NULL THEN
                    -- Decided here, not in the INSERT: Citus evaluates each
                    -- branch of a CASE there, and 'all' is no time.
                    v_start := CASE p_sub_start
                        WHEN 'all' THEN '-infinity'::timestamptz
                        WHEN 'now' THEN now()
                        ELSE p_sub_start::timestamptz END;
                    INSERT INTO queen.subscriptions (queue_id, consumer_group, starts_after)
                    VALUES (p_queue_id, p_group, v_start)
                    ON CONFLICT DO NOTHING;
                    SELECT s.starts_after INTO v_start FROM queen.subscriptions s
                     WHERE s.queue_id = p_queue_id AND s.consumer_group = p_group;
                END IF;
                IF v_start > '-infinity' THEN
                    SELECT s.base_offset + s.frame_count INTO v_committed FROM queen.log_segments s
                     WHERE s.partition_id = v_pid AND s.max_created_at <= v_start
                     ORDER BY s.base_offset DESC LIMIT 1;
                    v_committed := COALESCE(v_committed, 0);
                END IF;
            END IF;
            INSERT INTO queen.cursors (partition_id, consumer_group, committed)
            VALUES (v_pid, p_group, v_committed) ON CONFLICT DO NOTHING;
        END IF;
        IF v_committed >= v_c.next_offset THEN
            outcome := 'empty';
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF v_q.window_buffer > 0 AND v_c.last_push_at > now() - make_interval(secs => v_q.window_buffer) THEN
            outcome := 'busy';
            retry_at := v_c.last_push_at + make_interval(secs => v_q.window_buffer);
            RETURN NEXT;
            CONTINUE;
        END IF;

        v_from := greatest(v_committed, v_c.floor_offset);
        v_end := NULL;
        v_got := 0;
        v_seg_bytes := 0;
        outcome := 'segment';
        OPEN v_segs(v_pid, v_from, v_budget + 1);
        LOOP
            FETCH v_segs INTO v_seg;
            EXIT WHEN NOT FOUND;
            CONTINUE WHEN v_seg.base_offset + v_seg.frame_count <= v_from;
            IF v_seg.max_created_at > v_young THEN
                retry_at := v_seg.max_created_at + make_interval(secs => v_q.delayed_processing);
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
        -- holds it, and still as the look saw it: the same committed offset,
        -- and the same expiry, which the look found dead (a lease taken or
        -- extended since has another). The lock is an uncorrelated EXISTS,
        -- evaluated once, rather than a match on the locked row's ctid,
        -- which Citus cannot plan (CITUS.md).
        IF v_end IS NULL THEN
            -- Everything up to next_offset was removed by retention.
            UPDATE queen.cursors c SET committed = v_c.next_offset
             WHERE c.partition_id = v_pid AND c.consumer_group = p_group
               AND EXISTS (SELECT FROM queen.cursors x
                            WHERE x.partition_id = v_pid AND x.consumer_group = p_group FOR UPDATE SKIP LOCKED)
               AND c.committed = v_committed AND c.lease_expires_at IS NOT DISTINCT FROM v_c.lease_expires_at;
            outcome := CASE WHEN FOUND THEN 'empty' ELSE 'busy' END;
            RETURN NEXT;
            CONTINUE;
        ELSIF p_lease_id IS NULL THEN
            UPDATE queen.cursors c
               SET committed = v_end, batch_start = v_from, batch_end = v_end,
                   (lease_id, lease_expires_at, retry_count) = (SELECT r.lease_id, r.lease_expires_at, r.retry_count
                                                                  FROM queen.lease_release_v2(c.lease_id, c.lease_expires_at, c.retry_count, true, true) r),
                   total_consumed = c.total_consumed + v_got, last_consumed_at = now()
             WHERE c.partition_id = v_pid AND c.consumer_group = p_group
               AND EXISTS (SELECT FROM queen.cursors x
                            WHERE x.partition_id = v_pid AND x.consumer_group = p_group FOR UPDATE SKIP LOCKED)
               AND c.committed = v_committed AND c.lease_expires_at IS NOT DISTINCT FROM v_c.lease_expires_at;
            retry_at := NULL;
        ELSE
            retry_at := now() + make_interval(secs => v_q.lease_time);
            UPDATE queen.cursors c
               SET committed = v_from, batch_start = v_from, batch_end = v_end, lease_id = p_lease_id,
                   lease_expires_at = retry_at
             WHERE c.partition_id = v_pid AND c.consumer_group = p_group
               AND EXISTS (SELECT FROM queen.cursors x
                            WHERE x.partition_id = v_pid AND x.consumer_group = p_group FOR UPDATE SKIP LOCKED)
               AND c.committed = v_committed AND c.lease_expires_at IS NOT DISTINCT FROM v_c.lease_expires_at;
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
END
$$;
ALTER FUNCTION queen.pop_v2 SET plan_cache_mode = force_generic_plan;
