-- The one-shot rewind of the tenant's query (the StreamQuery annotation
-- streams.regent.dev/rewind-to), in one transaction: it deletes every
-- state row of the query and moves the query's consumer group p_group, on
-- every partition of the source queue where it has a cursor, to the first
-- message created at or after p_to. At segment granularity, as every seek
-- (queen.seek_to_v2): the segment that holds p_to is delivered again whole,
-- messages created before p_to with it. A partition the group has not
-- reached is left to start where its subscription says.
--
-- Once per p_token, the annotation value: the token is recorded on the
-- query row in the same transaction, and a call with the recorded token
-- changes nothing and answers what that rewind did. That is the fence
-- against an operator that dies between this commit and its status write.
--
-- outcome: 'rewound', 'already' (this token's rewind committed earlier;
-- rewound_at, partitions and state_rows describe it, state_rows NULL), or
-- 'missing' (the tenant has no query of that name).
--
-- The rewind waits for the query's cycles and keeps them out
-- (queen_streams.query_lock_cycles), so that no cycle that read the state
-- before the rewind commits after it. A cycle that acks a batch leased
-- before the rewind is then refused for its lease, which the seek
-- released; an idle flush takes no lease and is not refused, but it only
-- deletes and emits windows that it found ripe. The moved partitions are announced with the commit (a
-- NOTIFY in the transaction: a rewind is rare).
CREATE OR REPLACE FUNCTION queen_streams.query_rewind(
    p_tenant text,
    p_name   text,
    p_group  text,
    p_token  text,
    p_to     timestamptz,
    OUT outcome    text,
    OUT rewound_at timestamptz,
    OUT partitions integer,
    OUT state_rows bigint
) LANGUAGE plpgsql AS $$
DECLARE
    v_q queen_streams.queries%ROWTYPE;
    v_m record;
BEGIN
    SELECT * INTO v_q FROM queen_streams.queries q
     WHERE q.tenant = p_tenant AND q.name = p_name
       FOR UPDATE;
    IF NOT FOUND THEN
        outcome := 'missing';
        RETURN;
    END IF;
    IF v_q.rewind_token IS NOT DISTINCT FROM p_token THEN
        outcome := 'already';
        rewound_at := v_q.rewound_at;
        partitions := v_q.rewind_partitions;
        RETURN;
    END IF;

    PERFORM queen_streams.query_lock_cycles(p_tenant, v_q.id, v_q.source_queue);
    DELETE FROM queen_streams.state s WHERE s.query_id = v_q.id;
    GET DIAGNOSTICS state_rows = ROW_COUNT;
    -- The tenant quota's count of state rows (maxStateRows) goes with them.
    DELETE FROM queen_streams.state_rows s WHERE s.query_id = v_q.id;

    -- Just after the last message created before p_to: timestamptz counts
    -- microseconds.
    partitions := 0;
    FOR v_m IN SELECT m.queue_id, m.partition_id
                 FROM queen.seek_to_v2(p_tenant => p_tenant, p_queue => v_q.source_queue, p_group => p_group,
                                       p_partition => NULL, p_at => p_to - interval '1 microsecond') m
    LOOP
        PERFORM pg_notify('regent_log', v_m.queue_id || ':' || v_m.partition_id);
        partitions := partitions + 1;
    END LOOP;

    rewound_at := now();
    UPDATE queen_streams.queries q
       SET rewind_token = p_token, rewound_at = query_rewind.rewound_at, rewind_to = p_to,
           rewind_partitions = query_rewind.partitions
     WHERE q.id = v_q.id;
    outcome := 'rewound';
END
$$;
