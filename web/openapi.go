package web

import (
	"encoding/json"
	"reflect"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/jobs"
)

func init() {
	// Lists are never null in this API: every handler answers [] for none,
	// so a generated client types them as arrays, not array | null.
	huma.DefaultArrayNullable = false
}

// Spec is the OpenAPI document a web replica serves at /openapi.json, every
// route included, built without a database: `switchboard openapi` prints it
// and CI lints it.
func Spec(version string) *huma.OpenAPI {
	return New(Options{Version: version, PublicAPI: true, everyRoute: true}).api.OpenAPI()
}

// public marks an operation that needs no credentials (security: []).
var public = []map[string][]string{}

// apiTags are the operations' tags, declared once with what they cover.
var apiTags = []*huma.Tag{
	{Name: "Service", Description: "Liveness and readiness of a replica, for load balancers and orchestrators."},
	{Name: "Auth", Description: "Accounts: register, log in for a 24 h bearer token, and who the token belongs to."},
	{Name: "Projects", Description: "Projects shared by members with roles (viewer, developer, admin, owner), their members and invites; send X-Switchboard-Project to act in one."},
	{Name: "API keys", Description: "Long-lived sbk_ keys for servers, with scopes; revocation counts at once on every replica."},
	{Name: "Tasks", Description: "Scheduled (cron) and on-demand jobs that call a webhook or publish a realtime event."},
	{Name: "Runs", Description: "Executions of a task: trigger, list, cancel, retry, attempts and backfill."},
	{Name: "Realtime", Description: "WebSockets: tickets, connecting, publishing events, RPC to a user's client and room presence."},
	{Name: "Rooms", Description: "Created rooms: an owner, open or members-only visibility, members; removing a member evicts their sockets everywhere."},
	{Name: "Admin", Description: "Operator routes over accounts: the admin role, disabling and enabling. Admins only."},
	{Name: "Cluster", Description: "Operator routes over the replicas: status, disconnecting a user everywhere, draining a node. Admins only."},
}

// describeAPI adds what the document says about the API as a whole, and
// the hooks that shape each operation's entry.
func describeAPI(cfg *huma.Config) {
	cfg.Info.Contact = &huma.Contact{Name: "Switchboard", URL: "https://github.com/switchboard/switchboard"}
	cfg.Info.License = &huma.License{Name: "Proprietary", URL: "https://github.com/switchboard/switchboard"}
	cfg.Servers = []*huma.Server{{URL: "/", Description: "the host that serves this document"}}
	cfg.Tags = apiTags
	cfg.Components.Schemas.RegisterTypeAlias(reflect.TypeFor[jobs.Action](), reflect.TypeFor[actionSchema]())
	cfg.OnAddOperation = append(cfg.OnAddOperation, addExamples)
}

// actionSchema documents jobs.Action as what it is, one of two shapes told
// apart by type. Huma validates bodies against it (webhook without url, or
// publish without event, is a 422 naming the field); jobs' Normalize stays
// the source of truth for everything a schema cannot say.
type actionSchema struct{}

// webhookAction and publishAction are the two shapes of jobs.Action; the
// field documentation is jobs.Action's.
type webhookAction struct {
	Type    string            `json:"type" enum:"webhook" doc:"webhook: call url"`
	URL     string            `json:"url" maxLength:"2048" doc:"http(s) URL to call" example:"https://example.com/hooks/report"`
	Method  string            `json:"method,omitempty" enum:"GET,POST,PUT,PATCH,DELETE" doc:"HTTP method, default POST"`
	Headers map[string]string `json:"headers,omitempty" doc:"extra request headers, at most 50"`
	Body    json.RawMessage   `json:"body,omitempty" doc:"JSON body to send; default: the run's id, task id and tick"`
}

type publishAction struct {
	Type    string          `json:"type" enum:"publish" doc:"publish: send event to room, or to the task's owner"`
	Event   string          `json:"event" maxLength:"64" doc:"event name (1-64 bytes: letters, digits, . _ : -; task., rpc., server. and room. are reserved)" example:"report.ready"`
	Payload json.RawMessage `json:"payload,omitempty" doc:"event payload"`
	Room    string          `json:"room,omitempty" maxLength:"128" doc:"room to publish to (1-128 bytes, no control characters, no white space at either end); default the task's owner"`
}

// Schema registers WebhookAction, PublishAction and Action (their oneOf,
// discriminated by type) once, and refers to Action.
func (actionSchema) Schema(r huma.Registry) *huma.Schema {
	const name = "Action"
	if _, ok := r.Map()[name]; !ok {
		webhook := r.Schema(reflect.TypeFor[webhookAction](), true, "")
		publish := r.Schema(reflect.TypeFor[publishAction](), true, "")
		union := &huma.Schema{
			Description: "What a run does: call a webhook, or publish a realtime event. `type` tells which.",
			Type:        huma.TypeObject, Required: []string{"type"},
			OneOf: []*huma.Schema{webhook, publish},
			Discriminator: &huma.Discriminator{PropertyName: "type", Mapping: map[string]string{
				jobs.ActionWebhook: webhook.Ref, jobs.ActionPublish: publish.Ref,
			}},
		}
		union.PrecomputeMessages() // Huma validates with what this computes
		r.Map()[name] = union
	}
	return &huma.Schema{Ref: schemaRef(name)}
}

func schemaRef(name string) string { return "#/components/schemas/" + name }

// addExamples attaches the operation's examples from operationExamples: the
// request body's, and each listed response's.
func addExamples(_ *huma.OpenAPI, op *huma.Operation) {
	for _, ex := range operationExamples[op.OperationID] {
		ex.attach(op)
	}
}

// example is one documented value: a request body (status 0), a response
// body of a status, or a query parameter's value.
type example struct {
	status int
	param  string
	value  string // JSON
}

func (ex example) attach(op *huma.Operation) {
	var v any
	if err := json.Unmarshal([]byte(ex.value), &v); err != nil {
		panic("openapi example of " + op.OperationID + ": " + err.Error())
	}
	switch {
	case ex.param != "":
		for _, p := range op.Parameters {
			if p.Name == ex.param {
				p.Example = v
			}
		}
	case ex.status == 0:
		if op.RequestBody != nil {
			op.RequestBody.Content = withExample(op.RequestBody.Content, v)
		}
	default:
		if r := op.Responses[strconv.Itoa(ex.status)]; r != nil {
			r.Content = withExample(r.Content, v)
		}
	}
}

// withExample is content with v as the example of each media type: a copy,
// since Huma and documentRateLimits share content between responses (a
// 429's is a 404's), and the example belongs to this response only.
func withExample(content map[string]*huma.MediaType, v any) map[string]*huma.MediaType {
	out := make(map[string]*huma.MediaType, len(content))
	for t, m := range content {
		c := *m
		c.Examples = map[string]*huma.Example{"default": {Value: v}}
		out[t] = &c
	}
	return out
}
