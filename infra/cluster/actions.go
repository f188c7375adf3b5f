package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// Action is an operator action every node applies to its own part (close
// a user's sockets, ...). The package that owns the part implements Apply;
// cmd registers the action in Options.Actions; the route that offers it
// calls FanOut. The cluster knows nothing else about it.
type Action struct {
	// Name is the action's internal route segment:
	// POST /internal/v1/nodes/{node}/actions/{name}?arg=…
	Name string
	// Apply runs the action on this node for arg and says how many things
	// it changed.
	Apply func(ctx context.Context, arg string) int
}

// FanOutResult says which nodes applied an action.
type FanOutResult struct {
	Acked    []string // ids of the nodes that applied it
	Failed   []string // ids of the nodes that did not answer
	Affected int      // what Apply counted, over the nodes that acked
}

// ErrUnknownAction is an action no Options.Actions entry names.
var ErrUnknownAction = errors.New("no such cluster action")

// FanOut applies action name with arg on every node (ActionBudget each,
// concurrently) and reports which nodes acked.
func (c *Cluster) FanOut(ctx context.Context, name, arg string) (FanOutResult, error) {
	act, ok := c.actions[name]
	if !ok {
		return FanOutResult{}, fmt.Errorf("fan out %q: %w", name, ErrUnknownAction)
	}
	nodes, err := c.nodes(ctx)
	if err != nil {
		return FanOutResult{}, fmt.Errorf("fan out %q: %w", name, err)
	}
	path := "/actions/" + url.PathEscape(name) + "?" + url.Values{"arg": {arg}}.Encode()
	answers := gather(ctx, c, nodes, ActionBudget,
		func() actionAck { return actionAck{Affected: act.Apply(ctx, arg)} },
		func(ctx context.Context, n Node) (actionAck, error) {
			var ack actionAck
			err := c.callNode(ctx, name, n, http.MethodPost, nodePath(n, path), &ack)
			return ack, err
		})
	res := FanOutResult{Acked: []string{}, Failed: []string{}}
	for _, a := range answers {
		if a.err != nil {
			c.logger.Warn("action not applied on a node", "action", name, "node", a.node.ID, "error", a.err)
			res.Failed = append(res.Failed, a.node.ID)
			continue
		}
		res.Acked = append(res.Acked, a.node.ID)
		res.Affected += a.val.Affected
	}
	return res, nil
}

// actionAck is one node's answer to an action.
type actionAck struct {
	Affected int `json:"affected"`
}

func (c *Cluster) serveAction(w http.ResponseWriter, r *http.Request) {
	act, ok := c.actions[r.PathValue("action")]
	if !ok {
		writeProblem(w, http.StatusNotFound, "this node has no action "+r.PathValue("action"))
		return
	}
	writeJSON(w, actionAck{Affected: act.Apply(r.Context(), r.URL.Query().Get("arg"))})
}
