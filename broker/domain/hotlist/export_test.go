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

// Entries is how many partitions (queueID, group) holds, removed ones included.
func (l *List) Entries(queueID uuid.UUID, name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g := l.find(queueID, name); g != nil {
		return len(g.entries)
	}
	return 0
}
