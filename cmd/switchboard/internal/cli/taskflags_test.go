package cli

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/spf13/pflag"

	"github.com/switchboard/switchboard/cmd/switchboard/internal/apiclient"
)

// TestPatchSendsOnlyTheFlagsGiven: an update's body holds the flags given
// and nothing else; --on-demand and --no-max-concurrency send null.
func TestPatchSendsOnlyTheFlagsGiven(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, `{}`},
		{[]string{"--on-demand"}, `{"schedule":null}`},
		{[]string{"--schedule", "@hourly", "--priority", "2"}, `{"schedule":"@hourly","priority":2}`},
		{[]string{"--no-max-concurrency", "--name", "n"}, `{"name":"n","max_concurrency":null}`},
		{[]string{"--max-concurrency", "3"}, `{"max_concurrency":3}`},
		{[]string{"--publish", "e", "--payload", `{"a":1}`}, `{"action":{"type":"publish","event":"e","payload":{"a":1}}}`},
	} {
		var tf taskFlags
		f := pflag.NewFlagSet("update", pflag.ContinueOnError)
		tf.register(f, false)
		if err := f.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		p, err := tf.patch(f)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if b, _ := json.Marshal(p); string(b) != tc.want {
			t.Errorf("%v: body %s, want %s", tc.args, b, tc.want)
		}
	}
}

// TestPatchRefusesHalfAnAction: action flags without the action, or two
// actions, are usage errors.
func TestPatchRefusesHalfAnAction(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--method", "GET"}, {"--webhook", "http://x", "--publish", "e"},
		{"--body", "{"}, {"--webhook", "http://x", "--header", "nocolon"}, {"--on-demand", "--schedule", "@daily"}} {
		var tf taskFlags
		f := pflag.NewFlagSet("update", pflag.ContinueOnError)
		tf.register(f, false)
		if err := f.Parse(args); err != nil {
			t.Fatal(err)
		}
		_, err := tf.patch(f)
		if exitCode(err) != ExitUsage {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// TestExitCodes: what failed decides the exit code.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want int
	}{
		{&apiclient.Problem{Status: 401}, ExitAPI},
		{&apiclient.Problem{Status: 422}, ExitAPI},
		{&apiclient.Problem{Status: 503}, ExitServer},
		{&apiclient.NetworkError{Err: errors.New("refused")}, ExitServer},
		{runFailedError{run: apiclient.Run{Status: "failed"}}, ExitRunFailed},
		{usageError{errors.New("bad flag")}, ExitUsage},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("%T %v: exit %d, want %d", tc.err, tc.err, got, tc.want)
		}
	}
}
