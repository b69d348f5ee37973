// Package ids makes and passes Regent's ids: message, lease and
// transaction ids are UUIDv7 (New), and an id handed to the database goes
// as the 16 bytes pgx encodes in binary (ID, IDs). It imports no driver:
// making an id needs no seam to the database.
package ids

import "github.com/google/uuid"

// New returns a UUIDv7, falling back to a random UUID only if the clock
// source fails, which the uuid package reports as an error.
func New() uuid.UUID {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.New()
	}
	return id
}

// ID hands an id to pgx as [16]byte, which it encodes in binary; a
// uuid.UUID goes through its text form (it is a driver.Valuer), which a
// profile of the ack route found costing a fifth of its CPU.
func ID(id uuid.UUID) [16]byte { return id }

// IDs is ID for a slice.
func IDs(ids []uuid.UUID) [][16]byte {
	out := make([][16]byte, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}
