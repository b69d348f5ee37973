package hotlist

import "github.com/google/uuid"

// IDs are the candidates' partitions.
func IDs(cs []Candidate) []uuid.UUID {
	var out []uuid.UUID
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}
