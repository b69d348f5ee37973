-- The broker's push: queen.log_push_one_v1, the allocator, behind a first
-- argument that names the partition of the request's first segment. On
-- Citus it is the function's distribution argument (migrate's Citus mode
-- distributes the function with queen.partitions), so that the coordinator
-- sends the whole call to the worker holding that partition, which runs it
-- next to its rows: one command a push, and none of the allocator's
-- statements on the coordinator (CITUS.md). On PostgreSQL it is unused.
-- p_dedup_window is the broker's --dedup-window, which the allocator reads
-- from the session setting regent.dedup_window_seconds: a delegated call
-- runs in a session of Citus's on the worker, which the broker's
-- connection settings do not reach, so the call carries it (NULL: the
-- session's).
CREATE OR REPLACE FUNCTION queen.log_push_v2(
    p_shard         uuid,
    p_partitions    uuid[],
    p_frames        integer[],
    p_bodies        bytea[],
    p_checksums     bigint[],
    p_txids         text[],
    p_min_at        timestamptz[],
    p_max_at        timestamptz[],
    p_dedups        integer[],
    p_dedup_txids   text[],
    p_dedup_msg_ids uuid[],
    p_dedup_window  integer
) RETURNS TABLE (
    partition_id    uuid,
    outcome         text,
    base_offset     bigint,
    queue_id        uuid,
    dup_txids       text[],
    dup_message_ids uuid[]
) LANGUAGE plpgsql AS $$
BEGIN
    -- Set only where the session's differs: a broker's own session has
    -- it already, and setting it would cost every push a setting's undo at
    -- the commit.
    IF p_dedup_window IS NOT NULL
       AND p_dedup_window::text IS DISTINCT FROM current_setting('regent.dedup_window_seconds', true) THEN
        PERFORM set_config('regent.dedup_window_seconds', p_dedup_window::text, true);
    END IF;
    RETURN QUERY SELECT * FROM queen.log_push_one_v1(
        p_partitions => p_partitions, p_frames => p_frames, p_bodies => p_bodies, p_checksums => p_checksums,
        p_txids => p_txids, p_min_at => p_min_at, p_max_at => p_max_at, p_dedups => p_dedups,
        p_dedup_txids => p_dedup_txids, p_dedup_msg_ids => p_dedup_msg_ids);
END
$$;
