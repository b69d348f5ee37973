package server

import (
	"bytes"
	"encoding/json"
	"net"
	"strconv"
)

// JSONProtocolErrors wraps l so that the errors net/http answers on its
// own, before any handler runs (a broken request line, headers too large, a
// missing Host, an unknown transfer encoding or HTTP version), are JSON
// like every other error of the broker. net/http offers no hook for them:
// it writes them straight to the connection, in one write of a fixed shape,
// which the connection recognizes and rewrites.
func JSONProtocolErrors(l net.Listener) net.Listener { return jsonErrorListener{l} }

type jsonErrorListener struct{ net.Listener }

func (l jsonErrorListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return jsonErrorConn{c}, nil
}

type jsonErrorConn struct{ net.Conn }

// textErrorHeaders follow the status line of net/http's own error answers
// (server.go, conn.serve), and no other answer: net/http sorts the headers
// it writes, so a handler's Connection header comes before its Content-Type,
// and a handler's answer has a Date.
const textErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

func (c jsonErrorConn) Write(p []byte) (int, error) {
	end := bytes.Index(p, []byte("\r\n"))
	if !bytes.HasPrefix(p, []byte("HTTP/1.1 ")) || end < 0 || !bytes.HasPrefix(p[end:], []byte(textErrorHeaders)) {
		return c.Conn.Write(p)
	}
	text := p[end+len(textErrorHeaders):]
	// "400 Bad Request: missing required Host header" loses its code.
	if len(text) > 4 && text[3] == ' ' {
		text = text[4:]
	}
	body, _ := json.Marshal(map[string]string{"error": "Malformed HTTP request: " + string(text)})
	out := make([]byte, 0, end+len(body)+96)
	out = append(out, p[:end]...)
	out = append(out, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	out = strconv.AppendInt(out, int64(len(body)), 10)
	out = append(out, "\r\nConnection: close\r\n\r\n"...)
	out = append(out, body...)
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// CloseWrite keeps net/http's half-close before it closes a connection it
// refused, which lets the client read the error before the reset.
func (c jsonErrorConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
