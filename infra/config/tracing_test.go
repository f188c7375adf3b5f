package config

import (
	"strings"
	"testing"
)

// TestTracingExporter: tracing is off unless an exporter or an OTLP
// endpoint is named, and OTEL_SDK_DISABLED or "none" turn it off.
func TestTracingExporter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		t    Tracing
		want string
	}{
		{"nothing set", Tracing{}, ""},
		{"only a service name", Tracing{ServiceName: "api", Sampler: "always_on"}, ""},
		{"endpoint", Tracing{OTLPEndpoint: "http://collector:4318"}, TraceExporterOTLP},
		{"traces endpoint", Tracing{OTLPTracesEndpoint: "http://collector:4318/v1/traces"}, TraceExporterOTLP},
		{"console", Tracing{TracesExporter: "console"}, TraceExporterConsole},
		{"otlp without endpoint (the SDK's localhost default)", Tracing{TracesExporter: "otlp"}, TraceExporterOTLP},
		{"none beats an endpoint", Tracing{TracesExporter: "none", OTLPEndpoint: "http://collector:4318"}, ""},
		{"sdk disabled", Tracing{SDKDisabled: true, TracesExporter: "otlp"}, ""},
	} {
		if got := tc.t.Exporter(); got != tc.want {
			t.Errorf("%s: exporter %q, want %q", tc.name, got, tc.want)
		}
	}
	if p := (Tracing{}).Protocol(); p != OTLPProtocolHTTP {
		t.Errorf("default protocol %q", p)
	}
	if p := (Tracing{OTLPProtocol: "http/protobuf", OTLPTracesProtocol: "grpc"}).Protocol(); p != OTLPProtocolGRPC {
		t.Errorf("the traces protocol must win: %q", p)
	}
}

func TestTracingValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		t    Tracing
		want string // "" means valid
	}{
		{"all standard values", Tracing{TracesExporter: "otlp", OTLPProtocol: "grpc", OTLPTracesProtocol: "http/protobuf", Sampler: "parentbased_traceidratio", SamplerArg: "0.25"}, ""},
		{"zipkin exporter", Tracing{TracesExporter: "zipkin"}, "OTEL_TRACES_EXPORTER"},
		{"http/json", Tracing{OTLPProtocol: "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"bad traces protocol", Tracing{OTLPTracesProtocol: "udp"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{"unknown sampler", Tracing{Sampler: "sometimes"}, "OTEL_TRACES_SAMPLER:"},
		{"ratio above one", Tracing{SamplerArg: "1.5"}, "OTEL_TRACES_SAMPLER_ARG"},
		{"ratio not a number", Tracing{SamplerArg: "half"}, "OTEL_TRACES_SAMPLER_ARG"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := Config{Roles: []string{"web"}, AuthRate: 5, AuthBurst: 8, UserRate: 50, UserBurst: 100, BcryptCost: 10, ShutdownTimeout: 1, ClientIPHeader: "X-Forwarded-For", Tracing: tc.t}
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
