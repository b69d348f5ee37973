package queue

import (
	"github.com/regent-mq/regent/broker/auth"
	"github.com/regent-mq/regent/broker/server"
)

// Routes are the queue API's routes and their access levels (queue-api.md).
func (s *Store) Routes() []server.Route {
	return []server.Route{
		{Method: "POST", Path: "/api/v1/configure", Level: auth.ReadWrite, Handler: s.handleConfigure},
		{Method: "DELETE", Path: "/api/v1/resources/queues/{queue}", Level: auth.Admin, Handler: s.handleDelete},
		{Method: "POST", Path: "/api/v1/push", Level: auth.ReadWrite, Handler: s.handlePush},
	}
}
