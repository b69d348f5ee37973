-- The predecessors of resolve_partition_v2 (the maxQueues gate),
-- quota_apply_v2 (the limits of TenantQuota) and query_progress_v2 (which
-- adds the oldest unconsumed message) were never released: no broker or
-- operator of a previous release calls them, so they go at once instead of
-- after one release (UPGRADING.md). IF EXISTS: on a new database no
-- function exists yet when migrations run.
DROP FUNCTION IF EXISTS queen.resolve_partition(text, text, text, boolean, uuid, uuid);
DROP FUNCTION IF EXISTS queen_streams.quota_apply(text, boolean, integer);
DROP FUNCTION IF EXISTS queen_streams.query_progress(text, text, text, text);
DELETE FROM public.regent_schema_functions
 WHERE name IN ('queen.resolve_partition', 'queen_streams.quota_apply', 'queen_streams.query_progress');
