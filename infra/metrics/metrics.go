// Package metrics owns the Prometheus registry of a process. Components
// register their own collectors on it; nothing uses the global registry, so
// several servers can run in one test binary.
package metrics

import (
	"cmp"
	"net/http"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry with the Go runtime and process collectors.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Handler serves r in the Prometheus text format.
func Handler(r *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(r, promhttp.HandlerOpts{Registry: r})
}

// BuildInfo is the switchboard_build_info gauge: always 1, its labels say
// which build runs (version, Go version, VCS revision), so dashboards can
// show a rollout and alerts can tell replicas of different builds apart.
// The revision label is Revision(revision).
func BuildInfo(version, revision string) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "switchboard_build_info",
		Help: "Always 1; the labels name the build: version, goversion, revision.",
	}, []string{"version", "goversion", "revision"})
	g.WithLabelValues(version, runtime.Version(), Revision(revision)).Set(1)
	return g
}

// Revision is the commit a build names: stamped (-X main.revision), else
// the go command's VCS stamp, else "unknown".
func Revision(stamped string) string {
	return cmp.Or(stamped, vcsRevision(), "unknown")
}

// vcsRevision is the commit the go command stamped into the binary, if any.
func vcsRevision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return ""
}
