package workers

import (
	"context"
	"encoding/json"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard/switchboard/infra/tracing"
)

// riverMiddleware traces River when tp is set (nil: none). otelriver
// gives each insert a producer span and stores its traceparent in the
// job's metadata, and each attempt a consumer span ("river.work/task_run")
// linked to it; jobParent, entered first, makes the stored traceparent the
// attempt's parent too, so an API request, the job it queued and what the
// job did are one trace.
func riverMiddleware(tp trace.TracerProvider) []rivertype.Middleware {
	if tp == nil {
		return nil
	}
	return []rivertype.Middleware{&jobParent{}, otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
		TracerProvider: tp, MeterProvider: noop.NewMeterProvider(), // metrics are Prometheus'
		EnableTracePropagation: true, EnableWorkSpanJobKindSuffix: true,
	})}
}

// jobParent puts the trace context stored in a job's metadata into the
// context it is worked with.
type jobParent struct{ river.MiddlewareDefaults }

func (*jobParent) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	var meta map[string]any
	if len(job.Metadata) == 0 || json.Unmarshal(job.Metadata, &meta) != nil {
		return doInner(ctx)
	}
	carrier := propagation.MapCarrier{}
	for _, k := range tracing.Propagator.Fields() {
		if v, ok := meta[k].(string); ok {
			carrier[k] = v
		}
	}
	return doInner(tracing.Propagator.Extract(ctx, carrier))
}
