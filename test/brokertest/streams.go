package brokertest

import (
	"net/http"
	"testing"

	"github.com/regent-mq/regent/broker/pg/db"
)

// Queries lists the stream queries of token's tenant (see Do for the
// token), as GET /streams/v1/queries answers: decoded into the type the
// broker writes the listing from, so that a test reads fields, not JSON.
func (b *Broker) Queries(t testing.TB, token string) []db.Query {
	t.Helper()
	r := b.Do(t, "GET", "/streams/v1/queries", token, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET /streams/v1/queries = %d %s", r.Status, r.Body)
	}
	var l struct {
		Queries []db.Query `json:"queries"`
	}
	r.JSON(t, &l)
	if l.Queries == nil {
		t.Fatalf("GET /streams/v1/queries answered no queries array: %s", r.Body)
	}
	return l.Queries
}

// Query is the listed query named name (see Queries), failing the test
// when none is.
func (b *Broker) Query(t testing.TB, token, name string) db.Query {
	t.Helper()
	qs := b.Queries(t, token)
	for _, q := range qs {
		if q.Name == name {
			return q
		}
	}
	t.Fatalf("no query %q listed among %+v", name, qs)
	return db.Query{}
}
