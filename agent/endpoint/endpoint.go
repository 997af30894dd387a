package endpoint

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// DefaultSocket is the socket path in the hostPath directory shared by the
// agent and the endpoint pods of its node.
const DefaultSocket = "/var/run/meshperf/endpoint.sock"

// maxLine bounds a protocol line, in bytes.
const maxLine = 4096

// Hello is the endpoint's first and only message.
type Hello struct {
	// Node is the endpoint's node name ($NODE_NAME); empty means unknown.
	// An agent refuses an endpoint that names another node.
	Node string `json:"node,omitempty"`
	// Version is the endpoint's build version.
	Version string `json:"version,omitempty"`
}

// Reply is the agent's answer to a Hello, and its last word on the
// connection.
type Reply struct {
	// OK says the agent made the peer its pod endpoint.
	OK bool `json:"ok"`
	// PodIP is the address the agent found in the peer's namespace; set
	// with OK.
	PodIP string `json:"pod_ip,omitempty"`
	// Error says why the agent refused or dropped the endpoint.
	Error string `json:"error,omitempty"`
	// Replaced says that a newer endpoint took this one's place: the
	// endpoint waits its longest backoff before it tries again.
	Replaced bool `json:"replaced,omitempty"`
}

// ErrRefused is returned by an endpoint whose agent refused it.
var ErrRefused = errors.New("agent refused the endpoint")

// writeLine writes v as one JSON line.
func writeLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// readLine reads one JSON line into v, at most maxLine bytes.
func readLine(r *bufio.Reader, v any) error {
	var line []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return err
		}
		line = append(line, chunk...)
		if len(line) > maxLine {
			return fmt.Errorf("protocol line over %d bytes", maxLine)
		}
		if !isPrefix {
			break
		}
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("bad protocol line %q: %w", line, err)
	}
	return nil
}
