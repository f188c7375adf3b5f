package realtime

import "github.com/prometheus/client_golang/prometheus"

type busMetrics struct {
	published, received, spilled, dropped, reconnects prometheus.Counter
	pings                                             prometheus.Counter
	appended, appendFailed                            prometheus.Counter
	listenUp                                          prometheus.Gauge
	batch, appendBatch                                prometheus.Histogram
}

func newBusMetrics(reg prometheus.Registerer) busMetrics {
	m := busMetrics{
		published:    prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_bus_published_total", Help: "Bus messages sent to other replicas with pg_notify."}),
		received:     prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_bus_received_total", Help: "Bus messages from other replicas acted on here."}),
		spilled:      prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_bus_spilled_total", Help: "Bus messages of 8000 bytes or more, sent through the bus_spill table."}),
		dropped:      prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_bus_dropped_total", Help: "Bus messages that could not be sent to other replicas (database unavailable)."}),
		reconnects:   prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_bus_listen_reconnects_total", Help: "Reconnections of the dedicated LISTEN connection."}),
		pings:        prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_bus_listen_pings_total", Help: "Pings of the LISTEN connection after IdlePing without a notification (each a round trip)."}),
		appended:     prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_stream_appended_total", Help: "Events appended to their stream (acknowledged once stored)."}),
		appendFailed: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_stream_append_failed_total", Help: "Events whose append failed (the publisher got an error)."}),
		appendBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "switchboard_stream_append_batch_size", Help: "Events stored per append round trip.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500},
		}),
		listenUp: prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchboard_bus_listen_up", Help: "1 while the LISTEN connection is established."}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "switchboard_bus_notify_batch_size", Help: "Notifications sent per round trip.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500},
		}),
	}
	register(reg, m.published, m.received, m.spilled, m.dropped, m.reconnects, m.pings, m.listenUp, m.batch,
		m.appended, m.appendFailed, m.appendBatch)
	return m
}

type hubMetrics struct {
	accepted, slow, badFrames, reads prometheus.Counter
}

func newHubMetrics(reg prometheus.Registerer, h *Hub) hubMetrics {
	m := hubMetrics{
		accepted:  prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_ws_connections_total", Help: "WebSocket connections accepted."}),
		slow:      prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_ws_slow_consumer_disconnects_total", Help: "WebSocket connections closed with 3008 because the client did not read fast enough."}),
		badFrames: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_ws_bad_frames_total", Help: "Client frames answered with an error event."}),
		reads:     prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_stream_catchup_reads_total", Help: "Reads of the stream store for local sockets (gaps, LISTEN outages, resumes, new follows), each one query for many streams."}),
	}
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchboard_ws_connections", Help: "WebSocket connections open on this node."},
		func() float64 { return float64(h.LocalConnections()) })
	register(reg, m.accepted, m.slow, m.badFrames, m.reads, open)
	return m
}

func register(reg prometheus.Registerer, cs ...prometheus.Collector) {
	if reg == nil {
		return
	}
	for _, c := range cs {
		reg.MustRegister(c)
	}
}
