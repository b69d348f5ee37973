package brokertest

import "testing"

// Replica starts another broker on b's database, configured by opts, that
// acts in b's namespace (its queues, its tenant and token): a replica
// beside b, or a broker of another configuration reading what b wrote. It
// stops when the test ends.
func (b *Broker) Replica(t testing.TB, opts ...Option) *Broker {
	t.Helper()
	r := StartOn(t, b.DatabaseURL, opts...)
	r.prefix, r.Tenant, r.Token, r.Subject = b.prefix, b.Tenant, b.Token, b.Subject
	return r
}
