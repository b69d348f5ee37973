package migrate

// Previous lists the functions, by schema-qualified name, that a successor
// has replaced (pop by pop_v2, say) but that the upgrade policy keeps for one
// more release, because brokers of the previous release still call them
// during a rolling upgrade. A migration of the next release drops each one
// and takes it off this list (UPGRADING.md).
var Previous = []string{
	// Replaced by queen_streams.cycle_v5 (one composite argument), whose
	// wrapper it is meanwhile.
	"queen_streams.cycle_v4",
	// Replaced by queen.seek_to_v2 (the seek to the end and of one
	// partition), whose wrapper it is meanwhile.
	"queen.seek_to",
	// Replaced by queen_streams.register_v2 (the reset generation).
	"queen_streams.register",
}
