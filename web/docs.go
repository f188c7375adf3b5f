package web

import (
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
			// Keep the bearer token across reloads of the page.
			"persistAuthorization": "true",
			// No "validator" badge: it would call validator.swagger.io.
			"validatorUrl": "null",
		},
	})
	s.router.Get(docsPath, h.ServeHTTP)
	s.router.Get(docsPath+"/*", h.ServeHTTP)
}
