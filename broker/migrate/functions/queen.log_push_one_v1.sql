-- The allocator, and the only way data enters the log: /api/v1/push and the
-- streams cycle both call it. It takes one segment, already packed by the
-- broker, for one partition, assigns its base offset under the partition
-- row's lock, and stores it. Its answer is one row, whose outcome is:
--   'stored': base_offset is the segment's;
--   'duplicates': some of p_dedup_txids are already recorded for the
--     partition (dup_txids, with the message ids they were stored under
--     in dup_message_ids); nothing was written, and the broker repacks the
--     segment without them;
--   'gone': the partition no longer exists (its queue was deleted behind
--     the broker's cache); nothing was written.
--
-- p_dedup_txids are the client-supplied transaction ids among the frames
-- (ids the broker made are unique by construction and are not recorded).
-- It does not NOTIFY: the caller announces the partition of queue_id once
-- its transaction has committed (see broker/hotlist's Announcer).
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
    OUT outcome         text,
    OUT base_offset     bigint,
    OUT dup_txids       text[],
    OUT dup_message_ids uuid[],
    OUT queue_id        uuid
) LANGUAGE plpgsql AS $$
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
