-- TODO header
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
