// Package registration registers streaming queries on the broker through
// POST /streams/v1/queries, as a given tenant, and sorts the broker's answer
// into the four outcomes the operator acts on.
package registration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/streams/wire"
)

// Outcome is how the broker answered.
type Outcome int

const (
	// Registered is a 200: the query is registered under the hash sent.
	Registered Outcome = iota
	// Conflict is a 409: the name exists with another config_hash and the
	// request did not ask for a reset.
	Conflict
	// Denied is a 403 with denied: true: the tenant may not register a
	// new name (no grant, a disabled grant, or a full cap).
	Denied
	// Unavailable is anything else: the broker could not be reached or did
	// not answer as the contract says. Retrying later may help.
	Unavailable
	// Invalid is a 400 with success false: the broker refuses the
	// registration's table sink (sink_table), and registered nothing.
	Invalid
)

// Request is one registration.
type Request struct {
	Name       string `json:"name"`
	Source     string `json:"source_queue"`
	Sink       string `json:"sink_queue"`
	ConfigHash string `json:"config_hash"`
	Reset      bool   `json:"reset"`
	// SinkTable is the query's table sink, always sent: null removes the
	// one the query had.
	SinkTable *wire.SinkTable `json:"sink_table"`
}

// Result is the broker's answer.
type Result struct {
	Outcome Outcome
	// QueryID, Fresh and Reset come with Registered.
	QueryID string
	Fresh   bool
	Reset   bool
	// Message is the broker's error for Conflict and Denied, and what went
	// wrong for Unavailable.
	Message string
}

// Client calls the broker. It is safe for concurrent use.
type Client struct {
	url    string
	secret []byte
	http   *http.Client
}

// tokenTTL keeps minted tokens short-lived: one is minted per call.
const tokenTTL = 2 * time.Minute

// New returns a client of the broker at baseURL. With a signing secret, each
// call carries a read-write HS256 token for the query's tenant; without one,
// no Authorization header is sent (a broker with auth off).
func New(baseURL string, secret []byte, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	return &Client{url: strings.TrimRight(baseURL, "/") + "/streams/v1/queries", secret: secret, http: hc}
}

// Register registers req as tenant.
func (c *Client) Register(ctx context.Context, tenant string, req Request) Result {
	body, err := json.Marshal(req)
	if err != nil {
		return unavailable("encode registration: %v", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return unavailable("build request: %v", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if len(c.secret) > 0 {
		tok, err := auth.MintHS256(c.secret, auth.MintClaims{
			Subject: "regent-operator", Tenant: tenant, Role: auth.ReadWrite, TTL: tokenTTL,
		})
		if err != nil {
			return unavailable("mint token for tenant %q: %v", tenant, err)
		}
		hr.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		return unavailable("POST /streams/v1/queries: %v", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return unavailable("read the broker's answer (HTTP %d): %v", resp.StatusCode, err)
	}
	var ans struct {
		Success bool   `json:"success"`
		QueryID string `json:"query_id"`
		Fresh   bool   `json:"fresh"`
		Reset   bool   `json:"reset"`
		Denied  bool   `json:"denied"`
		Error   string `json:"error"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		return unavailable("HTTP %d with a body that is not JSON: %.200s", resp.StatusCode, raw)
	}
	switch {
	case resp.StatusCode == http.StatusOK && ans.Success && ans.QueryID != "":
		return Result{Outcome: Registered, QueryID: ans.QueryID, Fresh: ans.Fresh, Reset: ans.Reset}
	case resp.StatusCode == http.StatusConflict && !ans.Success:
		return Result{Outcome: Conflict, Message: ans.Error}
	case resp.StatusCode == http.StatusForbidden && !ans.Success && ans.Denied:
		return Result{Outcome: Denied, Message: ans.Error}
	case resp.StatusCode == http.StatusBadRequest && req.SinkTable != nil && strings.HasPrefix(ans.Error, "sink_table"):
		return Result{Outcome: Invalid, Message: ans.Error}
	case ans.Error != "":
		return unavailable("HTTP %d: %s", resp.StatusCode, ans.Error)
	default:
		return unavailable("HTTP %d: %.200s", resp.StatusCode, raw)
	}
}

func unavailable(format string, args ...any) Result {
	return Result{Outcome: Unavailable, Message: fmt.Sprintf(format, args...)}
}
