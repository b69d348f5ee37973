// Package broker holds no code: its packages are Regent's broker, and this
// is the rule of their layout, which broker/db/seam_test.go checks.
//
// The packages sit in three layers, from the outside in, and a request
// flows through them in that order, one way:
//
//   - The handlers speak HTTP: queue, streams, admin and console (the
//     routes), server and auth (the server and its middleware), httpx (the
//     JSON and error writing they share), and app, which wires everything.
//     A handler decodes and checks a request, calls the domain, and turns
//     the domain's typed errors into statuses.
//   - The domain holds the rules and speaks neither HTTP nor PostgreSQL
//     (it imports neither net/http nor pgx): backlog, batch, catalog,
//     commit, counters, flags, hotlist, ids, produce, queue/store, quota,
//     retention, seal, segment and spool, with config, metrics and tracing,
//     which every layer uses. Every write into the log goes through
//     produce.Producer.Emit; what a committed write leaves to do is a
//     commit.After, applied by commit.Applier.
//   - The seam speaks PostgreSQL, and is the only layer that imports pgx or
//     names a table: db (every statement of the broker, one file per
//     family), migrate (the schema and its migrations), and celldb (the
//     operator's access to the cell database, through SQL functions only).
//
// Imports point inwards, with one exception: the seam uses the domain's
// types (a catalog.PartitionRow, a segment.Frame), so a domain package that
// must call the seam and is imported by it declares the interface it needs
// (catalog.Store, counters.Store, quota.Store), which db satisfies.
//
// Two packages are shared outside the broker and import nothing of it:
// streams/wire, the streams routes' JSON, which regent-worker speaks too;
// and celldb, so that the operator links none of the broker's internals
// (only auth, to mint its tokens, config, for its flags, celldb, and
// streams/wire, for the registration's sink_table).
package broker
