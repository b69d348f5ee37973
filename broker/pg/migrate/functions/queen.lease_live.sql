-- The one rule of a live lease: its expiry lies after now(), the start of the
-- calling transaction. Every caller is a single statement, so now() is when
-- the request reached the database; and every check of a cursor's lease (a
-- pop's claim, an ack, a cycle's ack, an extension) runs under that cursor
-- row's lock, so a pop can never take over a lease that an ack is applying.
-- A cursor with an expiry but no lease id is a failed batch waiting out its
-- retryDelay: no lease, and not claimable before then either.
CREATE OR REPLACE FUNCTION queen.lease_live(p_expires_at timestamptz)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT coalesce(p_expires_at > now(), false)
$$;
