-- Whether a cursor holding lease p_lease_id until p_expires_at holds the
-- live lease p_given (queen.lease_live).
CREATE OR REPLACE FUNCTION queen.lease_held_by(p_lease_id uuid, p_expires_at timestamptz, p_given uuid)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT coalesce(p_lease_id = p_given, false) AND queen.lease_live(p_expires_at)
$$;
