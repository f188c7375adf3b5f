package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"testing"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// TestOpenAPICommand: `switchboard openapi` prints, without a database,
// the very document a web replica serves (what CI lints is what clients get).
func TestOpenAPICommand(t *testing.T) {
	t.Parallel()
	srv := startServer(t, testConfig(t, dbtest.NewDatabaseURL(t)))
	for _, tc := range []struct {
		args []string
		path string
	}{{nil, "/openapi.json"}, {[]string{"--yaml"}, "/openapi.yaml"}} {
		var printed bytes.Buffer
		if err := openapiCommand(tc.args, &printed); err != nil {
			t.Fatalf("openapi %v: %v", tc.args, err)
		}
		res, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		served, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v", tc.path, res.StatusCode, err)
		}
		if tc.path == "/openapi.json" && !sameJSON(t, printed.Bytes(), served) {
			t.Errorf("switchboard openapi differs from the served %s", tc.path)
		}
		if tc.path == "/openapi.yaml" && !bytes.Equal(bytes.TrimSpace(printed.Bytes()), bytes.TrimSpace(served)) {
			t.Errorf("switchboard openapi --yaml differs from the served %s", tc.path)
		}
	}
	if err := openapiCommand([]string{"--xml"}, io.Discard); err == nil {
		t.Error("openapi --xml: no error")
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}
