package cluster

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// BenchmarkStatus is GET /v1/cluster/status's work with three live nodes:
// the database queries and two signed calls.
func BenchmarkStatus(b *testing.B) {
	pool := dbtest.NewPool(b)
	nodes := []*testNode{startNode(b, pool), startNode(b, pool), startNode(b, pool)}
	ctx := context.Background()
	for b.Loop() {
		st, err := nodes[0].Status(ctx)
		if err != nil || st.Degraded {
			b.Fatalf("status: %+v %v", st, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/status")
}

// BenchmarkSignVerify is what signing adds to an internal call with a 1 KiB
// body: the caller's Sign and the receiver's check.
func BenchmarkSignVerify(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1024)
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/internal/v1/nodes/x/drain", bytes.NewReader(body))
		Sign(req, testSecret, "n", body, time.Now())
		if err := verify(req, testSecret, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}
