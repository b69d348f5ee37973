-- A trace's names go with their trace, as the trace goes with its
-- partition: trace_names carries the partition id, with a foreign key to
-- traces on (partition_id, trace_id). On Citus both tables are distributed
-- by the partition id, co-located (CITUS.md), so that recording a trace
-- writes one shard, and deleting a trace (with its message, by retention,
-- or with its queue) deletes its names by the key's cascade.
--
-- The previous release's brokers write names without the partition id
-- while a rolling upgrade runs (UPGRADING.md): the column is nullable, and
-- the key by trace id alone, its index and traces' key by id stay for them.
-- Their names (a partition id of NULL) are not listed until the next
-- release fills the column from traces, deletes what is left without a
-- trace, makes it NOT NULL and the primary key (tenant, name, trace_id,
-- partition_id), makes traces' key (partition_id, id), and drops what is
-- kept here. On Citus, which has no previous release, migrate fits the
-- keys so at once (citus.go).
ALTER TABLE queen.trace_names ADD COLUMN partition_id uuid;
UPDATE queen.trace_names n SET partition_id = t.partition_id FROM queen.traces t WHERE t.id = n.trace_id;
ALTER TABLE queen.traces ADD CONSTRAINT traces_partition_id_id_key UNIQUE (partition_id, id);
CREATE INDEX trace_names_partition_trace_idx ON queen.trace_names (partition_id, trace_id);
ALTER TABLE queen.trace_names
    ADD CONSTRAINT trace_names_partition_trace_fkey FOREIGN KEY (partition_id, trace_id)
        REFERENCES queen.traces (partition_id, id) ON DELETE CASCADE;
