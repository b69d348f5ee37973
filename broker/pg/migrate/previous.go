package migrate

// Previous lists the functions, by schema-qualified name, that a successor
// has replaced (pop by pop_v2, say) but that the upgrade policy keeps for one
// more release, because brokers of the previous release still call them
// during a rolling upgrade. A migration of the next release drops each one
// and takes it off this list (UPGRADING.md). queen.txid_offsets is the
// previous release's trace recording's, which queen.trace_add replaces.
var Previous = []string{"queen.ack", "queen.drop_below_floors", "queen.lease_release", "queen.pop", "queen.raise_floors",
	"queen.txid_offsets"}
