-- The updated_at a state row had when a ripe read (state/get with
-- ripe_at_or_before) last returned it: an idle flush that deletes a row
-- changed since is deferred, since it emits the value it read and would
-- lose what the change added (queen_streams.cycle_v2, rule 5). NULL: no
-- ripe read has returned the row. Without a default, the column costs
-- existing rows nothing.
ALTER TABLE queen_streams.state ADD COLUMN ripe_read_at timestamptz;
