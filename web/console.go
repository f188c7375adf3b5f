package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"

	"github.com/switchboard/switchboard/accounts"
)

// The console (/console) is a page of plain ES modules and CSS embedded in
// the binary: no build step, no request to any other host. It uses the
// public API like any client through one bridge: a request to
// /console/api/v1/... carrying the console's session cookie and its CSRF
// token becomes the request /v1/... with the session's bearer token, and
// goes through every middleware and check of the API. docs/security.md
// describes the model.

//go:embed console
var consoleFiles embed.FS

const (
	consolePath   = "/console"
	consoleAPI    = consolePath + "/api"
	consoleCookie = "switchboard_console"
	csrfHeader    = "X-CSRF-Token"
)

// mountConsole serves the page, its assets and its session routes.
func (s *Server) mountConsole() {
	assets, _ := fs.Sub(consoleFiles, "console")
	index, _ := fs.ReadFile(assets, "index.html")
	page := func(w http.ResponseWriter, r *http.Request) {
		consoleHeaders(w, r)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(index)
	}
	s.router.Get(consolePath, page)
	s.router.Get(consolePath+"/", page)
	files := http.StripPrefix(consolePath+"/", http.FileServerFS(assets))
	s.router.Get(consolePath+"/assets/*", func(w http.ResponseWriter, r *http.Request) {
		consoleHeaders(w, r)
		files.ServeHTTP(w, r)
	})
	s.router.Route(consoleAPI+"/session", func(r chi.Router) {
		r.Post("/", s.consoleSignIn)
		r.Get("/", s.consoleSession)
		r.Delete("/", s.consoleSignOut)
	})
}

// consoleHeaders: nothing but this origin may be loaded, connected to, or
// frame the page.
func consoleHeaders(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'"+socketSources(r.Host)+"; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}

// plainHost is a Host header that is only a name or an address and a
// port: nothing that could end a CSP directive or add a source.
var plainHost = regexp.MustCompile(`^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?$`)

// socketSources are the WebSocket sources of the console's connect-src:
// this host's ws: and wss: (browsers that do not count them as 'self'
// need them), or none when the Host header is not a plain host[:port].
func socketSources(host string) string {
	if !plainHost.MatchString(host) {
		return ""
	}
	return " ws://" + host + " wss://" + host
}

// csrfToken is bound to the session: an HMAC of its token under a key
// derived from the JWT secret, so every replica computes the same one and
// nobody without the session can.
func (s *Server) csrfToken(session string) string {
	k := hmac.New(sha256.New, s.tokens.secret)
	k.Write([]byte("switchboard console csrf"))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write([]byte(session))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// consoleOrigin refuses a request that a browser did not send from this
// origin: Sec-Fetch-Site, when sent, must be same-origin; a state-changing
// request must carry an Origin header naming this host.
func consoleOrigin(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return errors.New("cross-site request refused: the console's session works only from the console's own origin")
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return nil
	}
	origin := r.Header.Get("Origin")
	u, err := url.Parse(origin)
	if origin == "" || err != nil || u.Host != r.Host {
		return errors.New("request refused: a console request must come from the console's own origin (Origin " + r.Host + ")")
	}
	return nil
}

// consoleBridge turns /console/api/v1/... with the session cookie and its
// CSRF token into /v1/... with the session's bearer token. Without them the
// request is refused here and never reaches the API.
func (s *Server) consoleBridge(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, consoleAPI+"/v1/")
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		session, status, err := s.consoleCredentials(r)
		if err != nil {
			writeProblem(w, status, err.Error())
			return
		}
		r.URL.Path, r.URL.RawPath = "/v1/"+rest, ""
		r.RequestURI = r.URL.RequestURI()
		r.Header.Del("Cookie")
		r.Header.Del(csrfHeader)
		r.Header.Set("Authorization", "Bearer "+session)
		if rctx := chi.RouteContext(r.Context()); rctx != nil {
			rctx.RoutePath = r.URL.Path
		}
		next.ServeHTTP(w, r)
	})
}

// consoleCredentials checks origin, cookie and CSRF token, and returns the
// session's token.
func (s *Server) consoleCredentials(r *http.Request) (string, int, error) {
	if err := consoleOrigin(r); err != nil {
		return "", http.StatusForbidden, err
	}
	c, err := r.Cookie(consoleCookie)
	if err != nil || c.Value == "" {
		return "", http.StatusUnauthorized, errors.New("not signed in to the console: sign in again")
	}
	if _, err := s.tokens.verify(c.Value); err != nil {
		return "", http.StatusUnauthorized, errors.New("the console session has expired: sign in again")
	}
	got := r.Header.Get(csrfHeader)
	if got == "" || !hmac.Equal([]byte(got), []byte(s.csrfToken(c.Value))) {
		return "", http.StatusForbidden, errors.New("missing or wrong " + csrfHeader + " header: reload the console")
	}
	return c.Value, 0, nil
}

type consoleSessionBody struct {
	User      User      `json:"user"`
	CSRFToken string    `json:"csrf_token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// consoleSignIn checks an email and password like POST /v1/auth/login, under
// the same per-address limit, and sets the session cookie (and an admin's
// River UI cookie). The token never reaches the page's scripts.
func (s *Server) consoleSignIn(w http.ResponseWriter, r *http.Request) {
	if err := consoleOrigin(r); err != nil {
		writeProblem(w, http.StatusForbidden, err.Error())
		return
	}
	ctx := r.Context()
	if d := s.allowAuth(ctx, r.RemoteAddr); !d.Allowed {
		setRateHeaders(w.Header().Set, d)
		writeProblem(w, http.StatusTooManyRequests, tooManyDetail(d, "from this address"))
		return
	}
	var in loginCredentials
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&in); err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			writeProblem(w, http.StatusRequestEntityTooLarge, "a sign-in body is at most 4 KiB")
			return
		}
		writeProblem(w, http.StatusUnprocessableEntity, "send a JSON body {\"email\",\"password\"}")
		return
	}
	u, err := s.checkPassword(ctx, in.Email, in.Password)
	var he huma.StatusError
	switch {
	case errors.As(err, &he):
		writeProblem(w, he.GetStatus(), he.Error())
		return
	case err != nil:
		writeInternal(w, r, err)
		return
	}
	tok, exp, err := s.tokens.issue(u.ID, u.Role, u.TokenGeneration, time.Now())
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "internal error; the request id is "+requestIDFrom(ctx))
		return
	}
	secure := r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
	http.SetCookie(w, consoleSessionCookie(tok, exp, secure))
	if u.Role == accounts.RoleAdmin {
		w.Header().Add("Set-Cookie", sessionCookieFor(tok, exp, secure))
	}
	writeJSON(w, http.StatusOK, consoleSessionBody{User: userOut(u), CSRFToken: s.csrfToken(tok), ExpiresAt: exp})
}

// consoleSession answers who the cookie belongs to, with the CSRF token, so
// a reloaded page carries on. Only this origin can read it.
func (s *Server) consoleSession(w http.ResponseWriter, r *http.Request) {
	if err := consoleOrigin(r); err != nil {
		writeProblem(w, http.StatusForbidden, err.Error())
		return
	}
	c, err := r.Cookie(consoleCookie)
	if err != nil || c.Value == "" {
		writeProblem(w, http.StatusUnauthorized, "not signed in")
		return
	}
	p, err := s.tokens.verify(c.Value)
	if err != nil {
		writeProblem(w, http.StatusUnauthorized, "the console session has expired: sign in again")
		return
	}
	_, err = s.checkSession(r.Context(), p.Session, "")
	var u accounts.User
	if err == nil {
		u, err = accounts.UserByID(r.Context(), s.opts.Pool, p.UserID)
	}
	var refused *accounts.RefusedError
	switch {
	case errors.As(err, &refused):
		writeProblem(w, http.StatusUnauthorized, refused.Error())
		return
	case errors.Is(err, accounts.ErrUserNotFound):
		writeProblem(w, http.StatusUnauthorized, accounts.ErrAccountGone.Error())
		return
	case err != nil:
		// Not the account's fault: an outage must not sign people out.
		s.opts.Logger.ErrorContext(r.Context(), "console session: read the account", "error", err)
		writeInternal(w, r, err)
		return
	}
	exp, _ := s.tokens.expiry(c.Value)
	writeJSON(w, http.StatusOK, consoleSessionBody{User: userOut(u), CSRFToken: s.csrfToken(c.Value), ExpiresAt: exp})
}

// consoleSignOut ends the session's token on every replica (it is also an
// admin's River UI cookie) and clears the session cookies; it needs the
// CSRF token like every other action.
func (s *Server) consoleSignOut(w http.ResponseWriter, r *http.Request) {
	session, status, err := s.consoleCredentials(r)
	if err != nil {
		writeProblem(w, status, err.Error())
		return
	}
	if p, err := s.tokens.verify(session); err == nil {
		if err := accounts.EndSession(r.Context(), s.opts.Pool, p.Session, p.TokenExpires); err != nil && !errors.Is(err, accounts.ErrUserNotFound) {
			s.opts.Logger.ErrorContext(r.Context(), "console sign-out: end the session", "error", err)
			writeInternal(w, r, err)
			return
		}
	}
	secure := r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
	for _, c := range []*http.Cookie{consoleSessionCookie("", time.Time{}, secure), {Name: sessionCookie, Path: riverUIPath}} {
		c.MaxAge = -1
		c.HttpOnly, c.Secure, c.SameSite = true, secure, http.SameSiteStrictMode
		http.SetCookie(w, c)
	}
	w.WriteHeader(http.StatusNoContent)
}

func consoleSessionCookie(token string, expires time.Time, secure bool) *http.Cookie {
	return &http.Cookie{
		Name: consoleCookie, Value: token, Path: consolePath, Expires: expires,
		MaxAge: int(time.Until(expires).Seconds()), HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode,
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
