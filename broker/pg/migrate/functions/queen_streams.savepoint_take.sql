-- Takes the savepoint p_savepoint of the tenant's query p_name: its state
-- rows and the positions of its consumer group p_group on the source
-- partitions, with the registered config hash and p_pipeline (the
-- pipeline, as its owner serialises it; NULL when it has none). One
-- transaction that first waits for the query's cycles and keeps them out
-- (queen_streams.query_lock_cycles), so no cycle falls between the state
-- and the cursors: a cycle commits its state ops and its ack together.
--
-- Once per name: a name the query already has a savepoint under changes
-- nothing and answers that savepoint ('exists'). That is the fence against
-- an operator that dies between this commit and its status write.
--
-- outcome: 'taken', 'exists' or 'missing' (the tenant has no query of
-- that name).
CREATE OR REPLACE FUNCTION queen_streams.savepoint_take(
    p_tenant    text,
    p_name      text,
    p_group     text,
    p_savepoint text,
    p_pipeline  text,
    OUT outcome     text,
    OUT taken_at    timestamptz,
    OUT config_hash text,
    OUT state_rows  bigint,
    OUT cursors     integer
) LANGUAGE plpgsql AS $$
DECLARE
    v_q queen_streams.queries%ROWTYPE;
BEGIN
    -- FOR SHARE: a registration (a reset, a new hash) waits for the
    -- savepoint, and the savepoint for it.
    SELECT * INTO v_q FROM queen_streams.queries q
     WHERE q.tenant = p_tenant AND q.name = p_name
       FOR SHARE;
    IF NOT FOUND THEN
        outcome := 'missing';
        RETURN;
    END IF;
    SELECT s.taken_at, s.config_hash, s.state_rows, s.cursors INTO taken_at, config_hash, state_rows, cursors
      FROM queen_streams.savepoints s
     WHERE s.query_id = v_q.id AND s.name = p_savepoint;
    IF FOUND THEN
        outcome := 'exists';
        RETURN;
    END IF;

    PERFORM queen_streams.query_lock_cycles(p_tenant, v_q.id, v_q.source_queue);
    taken_at := now();
    config_hash := v_q.config_hash;
    INSERT INTO queen_streams.savepoints (query_id, name, consumer_group, config_hash, pipeline, state_rows, cursors, taken_at)
    VALUES (v_q.id, p_savepoint, p_group, v_q.config_hash, p_pipeline, 0, 0, taken_at);
    INSERT INTO queen_streams.savepoint_state (query_id, name, partition_id, key, value, updated_at)
    SELECT s.query_id, p_savepoint, s.partition_id, s.key, s.value, s.updated_at
      FROM queen_streams.state s WHERE s.query_id = v_q.id;
    GET DIAGNOSTICS state_rows = ROW_COUNT;
    INSERT INTO queen_streams.savepoint_cursors (query_id, name, partition_id, committed)
    SELECT v_q.id, p_savepoint, c.partition_id, c.committed
      FROM queen.cursors c
      JOIN queen.partitions p ON p.id = c.partition_id
      JOIN queen.queues qu ON qu.id = p.queue_id
     WHERE qu.tenant = p_tenant AND qu.name = v_q.source_queue AND c.consumer_group = p_group;
    GET DIAGNOSTICS cursors = ROW_COUNT;
    UPDATE queen_streams.savepoints s SET state_rows = savepoint_take.state_rows, cursors = savepoint_take.cursors
     WHERE s.query_id = v_q.id AND s.name = p_savepoint;
    outcome := 'taken';
END
$$;
