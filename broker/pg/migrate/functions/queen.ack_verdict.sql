-- The one verdict on an acknowledgement, which queen.ack_v2 (item by item),
-- queen.ack_cursor (set-based) and the cycle's source ack
-- (queen_streams.cycle_rules and cycle_short) all ask: may the ack of the
-- message at p_offset, with p_status, under the
-- lease p_given (NULL: none given), apply to a cursor at p_committed that
-- holds p_lease_id until p_expires_at? The answer is one of
--   'Message not found': no such message in the cursor's last batch
--     (p_offset NULL, see queen.txid_offsets);
--   'done': a success with nothing to write: the message is behind the
--     cursor (already acknowledged), or a 'failed' ack finds the batch
--     released already (it failed once, and that counted);
--   'Invalid or expired lease': a lease given that is not the cursor's live
--     lease (queen.lease_held_by), or a 'completed' ack with no lease held;
--   'apply': the caller applies the status.
-- The refusals are the wire's error texts (queue-api.md).
--
-- p_status is 'completed', 'failed', 'dlq' or 'retry': the words a client
-- may send, and which of them count as success on which route, are defined
-- once in the broker (db.AckWords), which passes these four. The cycle asks
-- as a 'completed' ack of the message at its cursor: whatever its status, a
-- cycle's ack needs the live lease it names.
--
-- A single SQL expression, so that the planner inlines it into the
-- set-based ack: it costs no call per message.
CREATE OR REPLACE FUNCTION queen.ack_verdict(p_offset bigint, p_committed bigint, p_lease_id uuid,
                                             p_expires_at timestamptz, p_status text, p_given uuid)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN p_offset IS NULL THEN 'Message not found'
        WHEN p_offset < p_committed THEN 'done'
        WHEN p_given IS NOT NULL AND NOT queen.lease_held_by(p_lease_id, p_expires_at, p_given)
            THEN 'Invalid or expired lease'
        WHEN p_lease_id IS NULL AND p_status = 'completed' THEN 'Invalid or expired lease'
        WHEN p_lease_id IS NULL AND p_status = 'failed' THEN 'done'
        ELSE 'apply'
    END
$$;
