// Package wire holds the names of Regent's extensions to the streams
// routes that the broker and regent-worker both speak, with no dependency,
// so that the worker can share them without the broker's.
package wire

// ResetGenerationHeader is the header of the broker's 200 answer to a
// registration (POST /streams/v1/queries) that carries the query's reset
// generation. A worker sends it back as reset_generation on every cycle,
// and the broker refuses the cycle with 409 once a reset or a restore has
// moved it. A header, so that the body keeps exactly the contract's shape.
const ResetGenerationHeader = "Regent-Reset-Generation"
