-- The one rule of releasing a cursor's lease early, before it expires: every
-- path that does it returns c through here (queen.ack and queen.ack_cursor,
-- queen_streams.cycle_rules and cycle_short, queen.pop with auto-ack,
-- queen.seek_to_v2 and so the
-- StreamQuery rewind, queen.raise_floors, and the broker's pop when it
-- abandons a batch or ends one at its deleted messages). Nothing else writes
-- lease_id or lease_expires_at but a pop's claim and a lease extension.
--
-- With p_release false, c comes back as it is: a set-based caller releases
-- some rows of an UPDATE and not others in one statement.
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
CREATE OR REPLACE FUNCTION queen.lease_release(c queen.cursors, p_release boolean, p_batch_left boolean)
RETURNS queen.cursors LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_release THEN
        c.lease_id := NULL;
        c.lease_expires_at := NULL;
        IF p_batch_left THEN
            c.retry_count := 0;
        END IF;
    END IF;
    RETURN c;
END
$$;
