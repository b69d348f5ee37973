package db

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"log/slog"
	"maps"
	"math/bits"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/pg/migrate"
)

// nodes are, on Citus, a pool on every node that holds shards of
// queen.partitions and the map of those shards, so that a hot call goes
// straight to the node that holds its partition (CITUS.md, section 5):
// every node has Citus's metadata and runs a delegated call it owns on the
// spot, where the coordinator would only pass it on. A map that a shard
// move has made stale is not wrong, only slower: the node that no longer
// holds the shard routes the call there. Everything else (the catalog, the
// admin reads, a queue's transaction, the hot list's NOTIFYs) stays on the
// coordinator's pool.
type nodes struct {
	base *pgxpool.Config // the coordinator's, which a node's pool copies
	m    atomic.Pointer[shardMap]

	mu    sync.Mutex // guards pools
	pools map[string]*pgxpool.Pool
}

// shardMap is the hash ranges of queen.partitions' shards, in order, and
// the pool of the node that holds each.
type shardMap struct {
	mins  []int32 // each shard's least hash
	pools []*pgxpool.Pool
}

// pool is the pool of the node that holds partition.
func (m *shardMap) pool(partition [16]byte) *pgxpool.Pool { return m.at(hashUUID(partition)) }

// at is the pool of the node whose shard's range holds hash: Citus's
// ranges cover every int32, the first from the least.
func (m *shardMap) at(hash int32) *pgxpool.Pool {
	i, found := slices.BinarySearch(m.mins, hash)
	if !found {
		i--
	}
	return m.pools[max(i, 0)]
}

// on is where a hot call of partition runs: the pool of the node that
// holds it, on Citus once the map is read, or the DB's own querier (the
// coordinator's pool, or a transaction's connection).
func (d *DB) on(partition [16]byte) Querier {
	if d.nodes == nil {
		return d.q
	}
	if m := d.nodes.m.Load(); m != nil {
		return m.pool(partition)
	}
	return d.q
}

// nodesSQL lists queen.partitions' shards by their least hash, with their
// nodes, and the coordinator's group (0) apart.
const nodesSQL = `SELECT s.shardminvalue::int4, n.groupid = 0, n.nodename, n.nodeport
	  FROM pg_dist_shard s
	  JOIN pg_dist_placement pl ON pl.shardid = s.shardid
	  JOIN pg_dist_node n ON n.groupid = pl.groupid AND n.noderole = 'primary' AND n.isactive
	 WHERE s.logicalrelid = 'queen.partitions'::regclass
	 ORDER BY 1`

// RefreshNodes reads the shard map again, on Citus, and opens a pool on a
// node that it names for the first time (without Options.Route it does
// nothing). It tells how many nodes the new map names when they are not
// the nodes of the map it replaces (0 when they are). A node that holds no
// shard any more keeps its pool until Close: calls may still hold it.
func (d *DB) RefreshNodes(ctx context.Context) (int, error) {
	if d.nodes == nil {
		return 0, nil
	}
	rows, err := d.pool.Query(ctx, nodesSQL)
	if err != nil {
		return 0, fmt.Errorf("read the shard map: %w", err)
	}
	m := &shardMap{}
	var least int32
	var coordinator bool
	var host string
	var port int
	_, err = pgx.ForEachRow(rows, []any{&least, &coordinator, &host, &port}, func() error {
		p := d.pool
		if !coordinator {
			var err error
			if p, err = d.nodes.nodePool(host, port); err != nil {
				return err
			}
		}
		m.mins, m.pools = append(m.mins, least), append(m.pools, p)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("read the shard map: %w", err)
	}
	if len(m.mins) == 0 {
		return 0, nil // not placed yet: the coordinator routes
	}
	if old := d.nodes.m.Swap(m); old == nil || !sameNodes(old.pools, m.pools) {
		return len(distinct(m.pools)), nil
	}
	return 0, nil
}

// distinct is the pools of ps, each once.
func distinct(ps []*pgxpool.Pool) map[*pgxpool.Pool]bool {
	out := map[*pgxpool.Pool]bool{}
	for _, p := range ps {
		out[p] = true
	}
	return out
}

func sameNodes(a, b []*pgxpool.Pool) bool { return maps.Equal(distinct(a), distinct(b)) }

// WatchNodes, on Citus, reads the shard map at once and then every
// interval until ctx ends, and logs a failed read: the map in force stays.
// On plain PostgreSQL, or without Options.Route, it returns at once.
func (d *DB) WatchNodes(ctx context.Context, every time.Duration, log *slog.Logger) {
	if d.nodes == nil {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for citus := false; ; {
		if !citus {
			// Unreachable at start: asked again at the next tick, and
			// the broker's requests say so themselves (503).
			var err error
			if citus, err = migrate.OnCitus(ctx, d.pool); err == nil && !citus {
				return
			}
		}
		if citus {
			switch n, err := d.RefreshNodes(ctx); {
			case err != nil && ctx.Err() == nil:
				log.Warn("the Citus shard map was not read; hot calls keep the map in force, or go through the coordinator before the first", "err", err)
			case n > 0:
				log.Info("hot calls go straight to the Citus nodes that hold their partitions", "nodes", n)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// nodePool returns the pool on host:port, opened on first use with the
// coordinator's settings.
func (n *nodes) nodePool(host string, port int) (*pgxpool.Pool, error) {
	key := net.JoinHostPort(host, strconv.Itoa(port))
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := n.pools[key]; p != nil {
		return p, nil
	}
	cfg := n.base.Copy()
	// The URL's TLS modes (sslmode=prefer tries TLS, then falls back to
	// none), each towards the node, whose name the certificate must hold.
	c := cfg.ConnConfig
	c.Host, c.Port, c.TLSConfig = host, uint16(port), serverName(c.TLSConfig, host)
	for i, f := range c.Fallbacks {
		c.Fallbacks[i] = &pgconn.FallbackConfig{Host: host, Port: uint16(port), TLSConfig: serverName(f.TLSConfig, host)}
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("open a pool on node %s: %w", key, err)
	}
	n.pools[key] = p
	return p, nil
}

// serverName is c for a server named host; nil (no TLS) stays nil.
func serverName(c *tls.Config, host string) *tls.Config {
	if c == nil {
		return nil
	}
	c = c.Clone()
	c.ServerName = host
	return c
}

// all is every node's pool; nil-safe.
func (n *nodes) all() []*pgxpool.Pool {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Collect(maps.Values(n.pools))
}

// close closes every node's pool; nil-safe.
func (n *nodes) close() {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.pools {
		p.Close()
	}
}

// hashUUID is PostgreSQL's uuid_hash, by which Citus places a uuid
// distribution column: hash_bytes of common/hashfn.c (Bob Jenkins'
// lookup3) over the 16 bytes, read as little-endian words as the servers
// Regent runs on do.
func hashUUID(u [16]byte) int32 {
	le := binary.LittleEndian
	a := uint32(0x9e3779b9 + 16 + 3923095)
	b, c := a, a
	a += le.Uint32(u[0:])
	b += le.Uint32(u[4:])
	c += le.Uint32(u[8:])
	// mix
	a -= c
	a ^= bits.RotateLeft32(c, 4)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 6)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 8)
	b += a
	a -= c
	a ^= bits.RotateLeft32(c, 16)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 19)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 4)
	b += a
	// the last 4 bytes, and final
	a += le.Uint32(u[12:])
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return int32(c)
}
