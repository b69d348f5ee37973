package queue

import (
	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/server"
)

// Routes are the queue API's routes and their access levels (queue-api.md).
func (s *Handler) Routes() []server.Route {
	return []server.Route{
		{Method: "POST", Path: "/api/v1/configure", Level: auth.ReadWrite, Handler: s.handleConfigure},
		{Method: "DELETE", Path: "/api/v1/resources/queues/{queue}", Level: auth.Admin, Handler: s.handleDelete},
		{Method: "POST", Path: "/api/v1/push", Level: auth.ReadWrite, Handler: s.handlePush, Span: "push"},
		{Method: "GET", Path: "/api/v1/pop/queue/{queue}", Level: auth.ReadWrite, Handler: s.handlePop, Span: "pop"},
		{Method: "GET", Path: "/api/v1/pop/queue/{queue}/partition/{partition}", Level: auth.ReadWrite, Handler: s.handlePop, Span: "pop"},
		{Method: "POST", Path: "/api/v1/ack", Level: auth.ReadWrite, Handler: s.handleAck, Span: "ack"},
		{Method: "POST", Path: "/api/v1/ack/batch", Level: auth.ReadWrite, Handler: s.handleAckBatch, Span: "ack"},
		{Method: "POST", Path: "/api/v1/lease/{leaseId}/extend", Level: auth.ReadWrite, Handler: s.handleExtend},
		{Method: "POST", Path: "/api/v1/transaction", Level: auth.ReadWrite, Handler: s.handleTransaction, Span: "transaction"},
		{Method: "GET", Path: "/api/v1/dlq", Level: auth.ReadOnly, Handler: s.handleDLQ},
	}
}
