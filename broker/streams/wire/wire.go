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
