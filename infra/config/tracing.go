package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Tracing is OpenTelemetry's standard variables as Switchboard reads them.
// Tracing is off unless they ask for it: an exporter (OTEL_TRACES_EXPORTER)
// or an OTLP endpoint is named. The OpenTelemetry SDK reads these and the
// other OTEL_EXPORTER_OTLP_* variables (TIMEOUT, COMPRESSION, CERTIFICATE,
// INSECURE, the per-signal TRACES_ forms) itself; they are here for
// --help, for the on/off decision and to refuse a bad value at start.
type Tracing struct {
	SDKDisabled        bool   `envconfig:"OTEL_SDK_DISABLED" desc:"true turns tracing off whatever else is set"`
	TracesExporter     string `envconfig:"OTEL_TRACES_EXPORTER" desc:"otlp, console (spans as JSON on stdout) or none; unset: otlp when an OTLP endpoint is set, otherwise tracing is off"`
	OTLPEndpoint       string `envconfig:"OTEL_EXPORTER_OTLP_ENDPOINT" desc:"OTLP collector URL, e.g. http://otel-collector:4318 (http/protobuf) or http://otel-collector:4317 (grpc); setting it turns tracing on"`
	OTLPTracesEndpoint string `envconfig:"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" desc:"OTLP URL for traces only (http/protobuf: the full URL, .../v1/traces); setting it turns tracing on"`
	OTLPProtocol       string `envconfig:"OTEL_EXPORTER_OTLP_PROTOCOL" desc:"http/protobuf (default) or grpc"`
	OTLPTracesProtocol string `envconfig:"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" desc:"overrides OTEL_EXPORTER_OTLP_PROTOCOL for traces"`
	OTLPHeaders        string `envconfig:"OTEL_EXPORTER_OTLP_HEADERS" desc:"key=value,... sent with every export (a collector's API key)"`
	ServiceName        string `envconfig:"OTEL_SERVICE_NAME" desc:"service.name of the spans; default switchboard"`
	ResourceAttributes string `envconfig:"OTEL_RESOURCE_ATTRIBUTES" desc:"key=value,... added to every span's resource (deployment.environment=prod)"`
	Sampler            string `envconfig:"OTEL_TRACES_SAMPLER" desc:"parentbased_always_on (default), parentbased_traceidratio, traceidratio, always_on, always_off or parentbased_always_off"`
	SamplerArg         string `envconfig:"OTEL_TRACES_SAMPLER_ARG" desc:"the ratio (0 to 1) of the traceidratio samplers; default 1"`
}

// Exporters and protocols the tracing setup knows.
const (
	TraceExporterOTLP    = "otlp"
	TraceExporterConsole = "console"
	TraceExporterNone    = "none"
	OTLPProtocolHTTP     = "http/protobuf"
	OTLPProtocolGRPC     = "grpc"
)

var samplers = []string{"always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"}

// Exporter is the span exporter the variables ask for: TraceExporterOTLP,
// TraceExporterConsole, or "" (tracing off).
func (t Tracing) Exporter() string {
	switch {
	case t.SDKDisabled, t.TracesExporter == TraceExporterNone:
		return ""
	case t.TracesExporter != "":
		return t.TracesExporter
	case t.OTLPEndpoint != "" || t.OTLPTracesEndpoint != "":
		return TraceExporterOTLP
	}
	return ""
}

// Protocol is the OTLP protocol for traces; default http/protobuf.
func (t Tracing) Protocol() string {
	switch {
	case t.OTLPTracesProtocol != "":
		return t.OTLPTracesProtocol
	case t.OTLPProtocol != "":
		return t.OTLPProtocol
	}
	return OTLPProtocolHTTP
}

func (t Tracing) validate() []error {
	var errs []error
	switch t.TracesExporter {
	case "", TraceExporterOTLP, TraceExporterConsole, TraceExporterNone:
	default:
		errs = append(errs, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not otlp, console or none", t.TracesExporter))
	}
	for name, p := range map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": t.OTLPProtocol, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": t.OTLPTracesProtocol} {
		if p != "" && p != OTLPProtocolHTTP && p != OTLPProtocolGRPC {
			errs = append(errs, fmt.Errorf("%s: %q is not http/protobuf or grpc", name, p))
		}
	}
	if t.Sampler != "" && !slices.Contains(samplers, t.Sampler) {
		errs = append(errs, fmt.Errorf("OTEL_TRACES_SAMPLER: %q is not one of %v", t.Sampler, samplers))
	}
	if t.SamplerArg != "" {
		if r, err := strconv.ParseFloat(t.SamplerArg, 64); err != nil || r < 0 || r > 1 {
			errs = append(errs, errors.New("OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1"))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errs
}
