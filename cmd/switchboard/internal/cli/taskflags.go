package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/switchboard/switchboard/cmd/switchboard/internal/apiclient"
)

// taskFlags are the flags that describe a task, shared by create and
// update; update sends only those given.
type taskFlags struct {
	schedule, timezone, overlap string
	onDemand, paused            bool
	webhook, method, body       string
	headers                     []string
	publish, room, payload      string
	maxConcurrency, maxAttempts int
	timeoutSeconds, priority    int
	noMaxConcurrency            bool
	file, name                  string
}

func (t *taskFlags) register(f *pflag.FlagSet, create bool) {
	f.StringVar(&t.schedule, "schedule", "", "cron expression, @hourly-style descriptor or @every <duration>; none: on demand")
	f.StringVar(&t.timezone, "timezone", "", "IANA zone the schedule is read in (default UTC)")
	f.StringVar(&t.overlap, "overlap", "", "skip, allow, buffer_one or cancel_other")
	f.StringVar(&t.webhook, "webhook", "", "action: call this http(s) URL")
	f.StringVar(&t.method, "method", "", "webhook method (default POST)")
	f.StringArrayVar(&t.headers, "header", nil, "webhook header Name=value (repeatable)")
	f.StringVar(&t.body, "body", "", "webhook JSON body")
	f.StringVar(&t.publish, "publish", "", "action: publish this event")
	f.StringVar(&t.room, "room", "", "publish to this room (default: the task's owner)")
	f.StringVar(&t.payload, "payload", "", "published event's JSON payload")
	f.IntVar(&t.maxConcurrency, "max-concurrency", 0, "with --overlap allow: runs at once across workers (1-100)")
	f.IntVar(&t.maxAttempts, "max-attempts", 0, "tries per run (1-25, default 3)")
	f.IntVar(&t.timeoutSeconds, "timeout", 0, "seconds per attempt (1-600, default 30)")
	f.IntVar(&t.priority, "priority", 0, "its runs' priority, 1 (first) to 4")
	if create {
		f.BoolVar(&t.paused, "paused", false, "create it paused (not active)")
		f.StringVar(&t.file, "file", "", "read the task as JSON (the API's body) from this file, - for stdin; flags given override it")
		return
	}
	f.StringVar(&t.name, "name", "", "rename the task")
	f.BoolVar(&t.onDemand, "on-demand", false, "remove the schedule: run only when triggered")
	f.BoolVar(&t.noMaxConcurrency, "no-max-concurrency", false, "remove the concurrency limit")
}

// action builds the action the flags describe; ok is false when they
// describe none.
func (t *taskFlags) action(f *pflag.FlagSet) (apiclient.Action, bool, error) {
	switch {
	case t.webhook != "" && t.publish != "":
		return apiclient.Action{}, false, usageError{fmt.Errorf("--webhook and --publish: a task does one")}
	case t.webhook != "":
		return t.webhookAction()
	case t.publish != "":
		a := apiclient.Action{Type: "publish", Event: t.publish, Room: t.room}
		p, err := jsonFlag("payload", t.payload)
		a.Payload = p
		return a, true, err
	}
	for _, name := range []string{"method", "header", "body", "room", "payload"} {
		if f.Changed(name) {
			return apiclient.Action{}, false, usageError{fmt.Errorf("--%s needs --webhook or --publish (the whole action)", name)}
		}
	}
	return apiclient.Action{}, false, nil
}

func (t *taskFlags) webhookAction() (apiclient.Action, bool, error) {
	a := apiclient.Action{Type: "webhook", URL: t.webhook, Method: t.method}
	for _, h := range t.headers {
		name, value, ok := strings.Cut(h, "=")
		if !ok || name == "" {
			return a, false, usageError{fmt.Errorf("--header %q: want Name=value", h)}
		}
		if a.Headers == nil {
			a.Headers = map[string]string{}
		}
		a.Headers[name] = value
	}
	body, err := jsonFlag("body", t.body)
	a.Body = body
	return a, true, err
}

// jsonFlag checks a flag's JSON; empty is none.
func jsonFlag(name, v string) (json.RawMessage, error) {
	if v == "" {
		return nil, nil
	}
	if !json.Valid([]byte(v)) {
		return nil, usageError{fmt.Errorf("--%s is not JSON: %q", name, clip(v, 60))}
	}
	return json.RawMessage(v), nil
}

// create is the new task: --file as the base, the name and flags given
// over it.
func (t *taskFlags) create(cmd *cobra.Command, name string) (apiclient.TaskCreate, error) {
	var in apiclient.TaskCreate
	if err := t.readFile(cmd, &in); err != nil {
		return in, err
	}
	f := cmd.Flags()
	if name != "" {
		in.Name = name
	}
	if action, ok, err := t.action(f); err != nil {
		return in, err
	} else if ok {
		in.Action = action
	}
	if in.Action.Type == "" {
		return in, usageError{fmt.Errorf("a task needs an action: --webhook URL or --publish EVENT")}
	}
	setIf(f, "schedule", &in.Schedule, t.schedule)
	in.Timezone = pick(f, "timezone", t.timezone, in.Timezone)
	in.Overlap = pick(f, "overlap", t.overlap, in.Overlap)
	setIf(f, "max-concurrency", &in.MaxConcurrency, t.maxConcurrency)
	in.MaxAttempts = pick(f, "max-attempts", t.maxAttempts, in.MaxAttempts)
	in.TimeoutSeconds = pick(f, "timeout", t.timeoutSeconds, in.TimeoutSeconds)
	in.Priority = pick(f, "priority", t.priority, in.Priority)
	if t.paused {
		active := false
		in.Active = &active
	}
	return in, nil
}

func (t *taskFlags) readFile(cmd *cobra.Command, in *apiclient.TaskCreate) error {
	if t.file == "" {
		return nil
	}
	var (
		b   []byte
		err error
	)
	if t.file == "-" {
		b, err = readAll(cmd.InOrStdin())
	} else {
		b, err = os.ReadFile(t.file)
	}
	if err != nil {
		return usageError{fmt.Errorf("--file: %w", err)}
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(in); err != nil {
		return usageError{fmt.Errorf("--file %s: %w", t.file, err)}
	}
	return nil
}

// patch is the change the flags given describe.
func (t *taskFlags) patch(f *pflag.FlagSet) (apiclient.TaskPatch, error) {
	var p apiclient.TaskPatch
	action, ok, err := t.action(f)
	if err != nil {
		return p, err
	}
	if ok {
		p.Action = &action
	}
	if t.onDemand && f.Changed("schedule") {
		return p, usageError{fmt.Errorf("--schedule and --on-demand: choose one")}
	}
	switch {
	case t.onDemand:
		p.Schedule = apiclient.Null[string]()
	case f.Changed("schedule"):
		p.Schedule = apiclient.Of(t.schedule)
	}
	switch {
	case t.noMaxConcurrency:
		p.MaxConcurrency = apiclient.Null[int]()
	case f.Changed("max-concurrency"):
		p.MaxConcurrency = apiclient.Of(t.maxConcurrency)
	}
	setIf(f, "name", &p.Name, t.name)
	setIf(f, "timezone", &p.Timezone, t.timezone)
	setIf(f, "overlap", &p.Overlap, t.overlap)
	setIf(f, "max-attempts", &p.MaxAttempts, t.maxAttempts)
	setIf(f, "timeout", &p.TimeoutSeconds, t.timeoutSeconds)
	setIf(f, "priority", &p.Priority, t.priority)
	return p, nil
}

// setIf points dst at v when the flag was given.
func setIf[T any](f *pflag.FlagSet, name string, dst **T, v T) {
	if f.Changed(name) {
		*dst = &v
	}
}

// pick is v when the flag was given, else def.
func pick[T any](f *pflag.FlagSet, name string, v, def T) T {
	if f.Changed(name) {
		return v
	}
	return def
}
