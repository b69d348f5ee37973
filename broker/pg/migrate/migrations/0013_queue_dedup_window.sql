-- Queen's newer queue options (queue-admin-api.md §8). dedup_window_seconds
-- is how long the queue's partitions remember a client transactionId; NULL
-- follows the broker's --dedup-window, which every connection carries as
-- regent.dedup_window_seconds (so it has no column default: a flag is not a
-- schema constant). storage is stored and echoed only: Regent has one engine.
ALTER TABLE queen.queues
    ADD COLUMN dedup_window_seconds integer CHECK (dedup_window_seconds >= 0),
    ADD COLUMN storage text NOT NULL DEFAULT 'rows' CHECK (storage IN ('rows', 'segments'));
