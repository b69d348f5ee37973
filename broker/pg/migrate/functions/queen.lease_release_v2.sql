-- The one rule of releasing a cursor's lease early, before it expires: every
-- path that does it passes the cursor's lease through here (queen.ack_v2 and queen.ack_cursor,
-- queen_streams.cycle_rules and cycle_short, queen.pop with auto-ack,
-- queen.seek_to_v2 and so the
-- StreamQuery rewind, queen.raise_floors_v2, and the broker's pop when it
-- abandons a batch or ends one at its deleted messages). Nothing else writes
-- lease_id or lease_expires_at but a pop's claim and a lease extension.
--
-- With p_release false, the lease comes back as it is: a set-based caller
-- releases some rows of an UPDATE and not others in one statement.
--
-- The lease goes (lease_id and lease_expires_at NULL), so the batch is
-- deliverable again at once; a 'failed' ack then sets the expiry to its
-- retryDelay. retry_count counts the failures of the batch at the cursor
-- ("once per leased batch", queue-api.md), so a release that leaves the
-- cursor at that batch keeps it (a 'retry' or 'failed' ack, a cycle's nack,
-- a pop nobody read), and one whose cursor leaves the batch clears it
-- (p_batch_left: the batch was acknowledged, skipped by a seek, or fell below
-- a retention floor; "the lease and the retry state are cleared",
-- streams-routes.md). The broker's pop that finds a whole batch deleted
-- moves the cursor past it yet keeps the count, as it always has: it passes
-- p_batch_left false (see broker/pg/db).
--
-- It takes the cursor's lease columns, not its row: on Citus a statement
-- runs on the table's shard, whose row type is the shard's, and a function
-- of queen.cursors would not be found (CITUS.md). Successor of
-- queen.lease_release, which took the row.
CREATE OR REPLACE FUNCTION queen.lease_release_v2(p_lease_id uuid, p_expires_at timestamptz, p_retry_count integer,
                                                  p_release boolean, p_batch_left boolean,
                                                  OUT lease_id uuid, OUT lease_expires_at timestamptz, OUT retry_count integer)
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    lease_id := p_lease_id;
    lease_expires_at := p_expires_at;
    retry_count := p_retry_count;
    IF p_release THEN
        lease_id := NULL;
        lease_expires_at := NULL;
        IF p_batch_left THEN
            retry_count := 0;
        END IF;
    END IF;
END
$$;
