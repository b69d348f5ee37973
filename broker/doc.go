// Package broker holds no code: its folders are Regent's broker, and their
// layout is the rule of its layers. A request flows through them from the
// outside in, one way:
//
//   - broker/api speaks HTTP: the routes (queue, streams, admin and
//     console), the server and its middleware (server, auth), and httpx, the
//     JSON and error writing they share. A handler decodes and checks a
//     request, calls the domain, and turns the domain's typed errors into
//     statuses.
//   - broker/domain holds the rules and speaks neither HTTP nor PostgreSQL
//     (it imports neither net/http nor pgx). Every write into the log goes
//     through produce.Producer.Emit; what a committed write leaves to do is
//     a commit.After, applied by commit.Applier; the queue's consumer side
//     (pop, ack, dead letters) is queuestore.
//   - broker/pg speaks PostgreSQL, and is the only code that imports pgx or
//     names a table: db (every statement of the broker, one file per
//     family), migrate (the schema and its migrations), and celldb (the
//     operator's access to the cell database, through SQL functions only).
//
// Beside them: app wires the three into a broker, and config, metrics and
// tracing serve every layer.
//
// Imports point inwards, with one exception: the seam uses the domain's
// types (a catalog.PartitionRow, a segment.Frame), so a domain package that
// must call the seam and is imported by it declares the interface it needs
// (catalog.Store, counters.Store, quota.Store), which db satisfies.
// broker/pg/db/seam_test.go checks the layers against the folders.
//
// Two packages are shared outside the broker and import nothing of it:
// api/streams/wire, the streams routes' JSON, which regent-worker speaks
// too; and pg/celldb, so that the operator links none of the broker's
// internals (only api/auth, to mint its tokens, config, for its flags,
// pg/celldb, and api/streams/wire, for the registration's sink_table).
package broker
