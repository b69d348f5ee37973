-- A partition's floor: every offset below it is deleted, whether or not the
-- segment holding it still exists. Retention and eviction delete whole
-- segments, but the offset where a rule stops (the lowest committed cursor,
-- the first message younger than a limit) usually falls inside one; the
-- floor is that offset, and pops, acks and lookups treat what is below it
-- as gone. It only rises, and the segments wholly below it are dropped.
ALTER TABLE queen.partitions ADD COLUMN floor_offset bigint NOT NULL DEFAULT 0;
