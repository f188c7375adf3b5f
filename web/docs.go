package web

import (
	"net/http"

	"github.com/swaggest/swgui"
	"github.com/swaggest/swgui/v5emb"
)

const docsPath = "/docs"

// mountDocs serves the API docs page (Swagger UI) at /docs from assets
// embedded in the binary, so it works with no internet. "Try it out" sends
// requests to the page's own origin: the OpenAPI document lists no servers.
func (s *Server) mountDocs() {
	h := v5emb.NewHandlerWithConfig(swgui.Config{
		Title:       "Switchboard API",
		SwaggerJSON: "/openapi.json",
		BasePath:    docsPath + "/",
		SettingsUI: map[string]string{
			// The bearer token is forgotten with the page, never kept in
			// localStorage where any script of this origin could read it.
			"persistAuthorization": "false",
			// No "validator" badge: it would call validator.swagger.io.
			"validatorUrl": "null",
		},
	})
	page := docsHeaders(h)
	s.router.Get(docsPath, page)
	s.router.Get(docsPath+"/*", page)
}

// docsHeaders: no other site may frame the docs page (it takes a bearer
// token and sends requests with it).
func docsHeaders(next http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	}
}
