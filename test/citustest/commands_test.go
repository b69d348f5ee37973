package citustest_test

import (
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// command is a statement the coordinator sent a worker (Where names it), as
// citus.log_remote_commands reports it, or one it ran itself (Where is "the
// coordinator"), as citus.log_local_commands does.
type command struct{ SQL, Where string }

// commands records the commands that the sessions of a connection config
// report in their notices.
type commands struct {
	mu   sync.Mutex
	sent []command
}

func record(cfg *pgx.ConnConfig) *commands {
	c := &commands{}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if cmd, ok := strings.CutPrefix(n.Message, "issuing "); ok {
			c.sent = append(c.sent, command{cmd, n.Detail})
		} else if strings.HasPrefix(n.Message, "executing the command locally") {
			c.sent = append(c.sent, command{n.Message, "the coordinator"})
		}
	}
	return c
}

// take returns the commands recorded since the last take, and forgets them.
func (c *commands) take() []command {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.sent)
	c.sent = nil
	return out
}
