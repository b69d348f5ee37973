-- The least SQL of one state read: the rows of one (query, partition), in
-- key order, alternately all 64 of them and the 32 under a key prefix, as
-- regent-bench's stateget reads them.
\set prefix random(0, 1)
\if :prefix
SELECT key, value FROM queen_streams.state
 WHERE query_id = '00000000-0000-0000-0002-000000000001' AND partition_id = '00000000-0000-0000-0002-000000000001'
   AND key >= E'tumb:60\x1f' AND key < E'tumb:60\x20'
 ORDER BY key;
\else
SELECT key, value FROM queen_streams.state
 WHERE query_id = '00000000-0000-0000-0002-000000000001' AND partition_id = '00000000-0000-0000-0002-000000000001'
 ORDER BY key;
\endif
