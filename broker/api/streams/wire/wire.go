// Package wire is what the broker and regent-worker both speak on the
// streams routes: the cycle's request and answer, which are Queen's JSON
// exactly (stock clients share these routes), and the names of Regent's
// extensions. It depends on nothing of the broker's, so that the worker can
// share it without linking the broker.
package wire

// ResetGenerationHeader is the header of the broker's 200 answer to a
// registration (POST /streams/v1/queries) that carries the query's reset
// generation. A worker sends it back as reset_generation on every cycle,
// and the broker refuses the cycle with 409 once a reset or a restore has
// moved it. A header, so that the body keeps exactly the contract's shape.
const ResetGenerationHeader = "Regent-Reset-Generation"

// SinkTableHeader is the header of the broker's 200 answer to a
// registration of a query with a table sink: the table's name. A worker
// that sees it sends its outputs as table_rows too (CycleRequest), and the
// broker writes them to the table in the cycle's transaction.
const SinkTableHeader = "Regent-Sink-Table"

// SinkTable is a registration's sink_table: the query's outputs written as
// rows of Table, in the query's tenant's schema. Absent from a
// registration, the query's stays as it is; null removes it.
type SinkTable struct {
	// Schema, when set, must be the tenant's schema (regent_<tenant>).
	Schema string `json:"schema,omitempty"`
	Table  string `json:"table"`
	// KeyColumns are the columns of a row's identity: in mode upsert, a
	// row replaces the one of the same key columns.
	KeyColumns []string `json:"key_columns"`
	// Mode is upsert (the default) or append.
	Mode string `json:"mode,omitempty"`
}
