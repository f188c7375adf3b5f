package cluster

import (
	"net/http"
	"net/url"
	"strings"
)

// InternalPrefix is where the node-to-node routes live. They are not part of
// the public API: every one needs a request signed with the cluster secret,
// and names its target node in the path, so a signed request meant for one
// node is refused by any other.
const InternalPrefix = "/internal/v1"

// Handler serves the internal routes; mount it at InternalPrefix on every
// node, whatever its roles.
func (c *Cluster) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+InternalPrefix+"/nodes/{node}/status", c.forSelf("status", c.serveStatus))
	mux.Handle("POST "+InternalPrefix+"/nodes/{node}/actions/{action}", c.forSelf("action", c.serveAction))
	mux.Handle("POST "+InternalPrefix+"/nodes/{node}/drain", c.forSelf("drain", c.serveDrain))
	return c.refuseOtherNodes(requireSignature(c.opts.Secret, mux))
}

// refuseOtherNodes answers 421 to a call whose path names another node
// before anything reads its body (the handlers check again, signed).
func (c *Cluster) refuseOtherNodes(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, InternalPrefix+"/nodes/")
		if node, _, _ := strings.Cut(rest, "/"); ok && node != c.opts.NodeID {
			writeProblem(w, http.StatusMisdirectedRequest, "this is not node "+node)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// forSelf refuses a call aimed at another node (an address now used by a
// new process) and counts the call.
func (c *Cluster) forSelf(name string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if node := r.PathValue("node"); node != c.opts.NodeID {
			writeProblem(w, http.StatusMisdirectedRequest, "this is node "+c.opts.NodeID+", not "+node)
			return
		}
		c.metrics.inbound.Add(1)
		c.metrics.received.WithLabelValues(name).Inc()
		h(w, r)
	})
}

func nodePath(n Node, rest string) string {
	return InternalPrefix + "/nodes/" + url.PathEscape(n.ID) + rest
}

// localStatus is what a node says about itself.
type localStatus struct {
	ID            string `json:"id"`
	Draining      bool   `json:"draining"`
	WSConnections int    `json:"ws_connections"`
}

func (c *Cluster) localStatus() localStatus {
	return localStatus{ID: c.opts.NodeID, Draining: c.draining.Load(), WSConnections: c.opts.Sockets.LocalConnections()}
}

func (c *Cluster) serveStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, c.localStatus())
}

type drainAck struct {
	Acked bool `json:"acked"`
}

func (c *Cluster) serveDrain(w http.ResponseWriter, r *http.Request) {
	c.DrainLocal(r.Context())
	writeJSON(w, drainAck{Acked: true})
}
