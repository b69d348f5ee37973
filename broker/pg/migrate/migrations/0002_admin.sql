-- Cluster-wide switches of the admin API (queue-admin-api.md §7): push
-- maintenance ('maintenance_mode') and pop maintenance
-- ('pop_maintenance_mode'), Queen's keys. One row per switch that was ever
-- set; a missing row is off. Not per tenant: maintenance is the operator's.
CREATE TABLE queen.system_flags (
    name       text PRIMARY KEY,
    enabled    boolean NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- A subscription's mode as Queen reports it ('new' or 'timestamp'), kept by
-- the subscription route when it moves the start. NULL until then: the pop
-- that creates the row leaves it, and the mode is read from the row itself
-- (a 'new' start is the instant the row was created).
ALTER TABLE queen.subscriptions ADD COLUMN mode text;
