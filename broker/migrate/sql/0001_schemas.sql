-- The two schemas Regent owns. `queen` holds the queue and its log,
-- `queen_streams` the streaming queries; the names are part of the contract
-- (Queen MQ tooling reads them).
CREATE SCHEMA IF NOT EXISTS queen;
CREATE SCHEMA IF NOT EXISTS queen_streams;
