-- Restores the savepoint p_savepoint of the tenant's query p_name, in one
-- transaction that waits for the query's cycles and keeps them out
-- (queen_streams.query_lock_cycles):
--   - the state rows become the savepoint's, and their count
--     (queen_streams.state_rows) with them;
--   - the consumer group p_group goes back to the savepoint's position on
--     each source partition (never below the partition's retention floor),
--     and loses its cursor on a partition it had not reached then, so that
--     its subscription decides again where it starts there; every lease of
--     the group on the source is released, so a cycle of a batch leased
--     before the restore is refused for its lease;
--   - the registration takes the savepoint's config hash, and its
--     reset_generation grows by one, as a reset's does: the restore is a
--     reset to known state.
-- The moved partitions are announced with the commit.
--
-- Once per p_token: the token is recorded on the query row in the same
-- transaction, and a call with the recorded token changes nothing and
-- answers what that restore did ('already'). A second restore after the
-- workers ran would emit their windows again.
--
-- outcome: 'restored', 'already', 'missing' (the tenant has no query of
-- that name) or 'no_savepoint' (the query has no savepoint of that name).
CREATE OR REPLACE FUNCTION queen_streams.savepoint_restore(
    p_tenant    text,
    p_name      text,
    p_group     text,
    p_savepoint text,
    p_token     text,
    OUT outcome     text,
    OUT restored_at timestamptz,
    OUT config_hash text,
    OUT pipeline    text,
    OUT state_rows  bigint,
    OUT cursors     integer
) LANGUAGE plpgsql AS $$
DECLARE
    v_q  queen_streams.queries%ROWTYPE;
    v_sp queen_streams.savepoints%ROWTYPE;
    v_moved text[];
    v_note  text;
BEGIN
    SELECT * INTO v_q FROM queen_streams.queries q
     WHERE q.tenant = p_tenant AND q.name = p_name
       FOR UPDATE;
    IF NOT FOUND THEN
        outcome := 'missing';
        RETURN;
    END IF;
    IF v_q.restore_token IS NOT DISTINCT FROM p_token THEN
        SELECT * INTO v_sp FROM queen_streams.savepoints s WHERE s.query_id = v_q.id AND s.name = v_q.restored_from;
        outcome := 'already';
        restored_at := v_q.restored_at;
        config_hash := v_q.config_hash;
        pipeline := v_sp.pipeline;
        state_rows := v_sp.state_rows;
        cursors := v_sp.cursors;
        RETURN;
    END IF;
    SELECT * INTO v_sp FROM queen_streams.savepoints s WHERE s.query_id = v_q.id AND s.name = p_savepoint;
    IF NOT FOUND THEN
        outcome := 'no_savepoint';
        RETURN;
    END IF;

    PERFORM queen_streams.query_lock_cycles(p_tenant, v_q.id, v_q.source_queue);
    DELETE FROM queen_streams.state s WHERE s.query_id = v_q.id;
    INSERT INTO queen_streams.state (query_id, partition_id, key, value, updated_at)
    SELECT s.query_id, s.partition_id, s.key, s.value, s.updated_at
      FROM queen_streams.savepoint_state s WHERE s.query_id = v_q.id AND s.name = p_savepoint;
    GET DIAGNOSTICS state_rows = ROW_COUNT;
    DELETE FROM queen_streams.state_rows s WHERE s.query_id = v_q.id;
    INSERT INTO queen_streams.state_rows (query_id, partition_id, row_count)
    SELECT s.query_id, s.partition_id, count(*) FROM queen_streams.state s
     WHERE s.query_id = v_q.id GROUP BY s.query_id, s.partition_id;

    WITH src AS (
        SELECT p.id AS partition_id, p.queue_id, p.floor_offset, sc.committed
          FROM queen.partitions p
          JOIN queen.queues qu ON qu.id = p.queue_id
          LEFT JOIN queen_streams.savepoint_cursors sc
            ON sc.query_id = v_q.id AND sc.name = p_savepoint AND sc.partition_id = p.id
         WHERE qu.tenant = p_tenant AND qu.name = v_q.source_queue
    ), gone AS (
        DELETE FROM queen.cursors c USING src
         WHERE c.partition_id = src.partition_id AND c.consumer_group = p_group AND src.committed IS NULL
        RETURNING src.queue_id, src.partition_id
    ), moved AS (
        INSERT INTO queen.cursors AS c (partition_id, consumer_group, committed)
        SELECT src.partition_id, p_group, greatest(src.committed, src.floor_offset)
          FROM src WHERE src.committed IS NOT NULL
        ON CONFLICT (partition_id, consumer_group) DO UPDATE
           SET committed = EXCLUDED.committed, lease_id = NULL, lease_expires_at = NULL, retry_count = 0
        RETURNING c.partition_id
    )
    SELECT (SELECT count(*) FROM moved)::integer,
           array(SELECT g.queue_id || ':' || g.partition_id FROM gone g
                 UNION ALL
                 SELECT src.queue_id || ':' || m.partition_id FROM moved m JOIN src ON src.partition_id = m.partition_id)
      INTO cursors, v_moved;
    FOREACH v_note IN ARRAY v_moved LOOP
        PERFORM pg_notify('regent_log', v_note);
    END LOOP;

    restored_at := now();
    config_hash := v_sp.config_hash;
    pipeline := v_sp.pipeline;
    UPDATE queen_streams.queries q
       SET config_hash = v_sp.config_hash, reset_generation = q.reset_generation + 1, updated_at = now(),
           restore_token = p_token, restored_at = savepoint_restore.restored_at, restored_from = p_savepoint
     WHERE q.id = v_q.id;
    outcome := 'restored';
END
$$;
