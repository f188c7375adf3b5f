package web

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/ratelimit"
)

// sessionCookie carries an admin's access token to the River UI, whose own
// API calls send no Authorization header. It is set at login, HttpOnly,
// SameSite=Strict, and scoped to /riverui.
const sessionCookie = "switchboard_session"

const riverUIPath = "/riverui"

// mountRiverUI serves the River UI at /riverui/ to admins: by the session
// cookie, a bearer token, or HTTP basic auth with an admin's email and
// password. Anyone else gets 401 (with a basic-auth challenge) or 403.
func (s *Server) mountRiverUI(h http.Handler) {
	s.basicCache = &basicAuthCache{entries: map[[32]byte]basicAuthEntry{}}
	s.router.Get(riverUIPath, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, riverUIPath+"/", http.StatusMovedPermanently)
	})
	s.router.Handle(riverUIPath+"/*", s.adminOnly(h))
}

func (s *Server) adminOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.operator(r)
		switch {
		case err == nil && p.Session.TokenID != "":
			// The role, state and session as stored now, as for every API
			// route: a signed-out cookie or token is refused.
			var a accounts.Access
			a, err = s.checkSession(r.Context(), p.Session, "")
			p.Role = a.Role
		case err == nil: // basic auth: no session
			p.Role, err = s.activeRole(r.Context(), p.UserID)
		}
		var limited *limitedError
		var refused *accounts.RefusedError
		switch {
		case errors.As(err, &limited):
			setRateHeaders(w.Header().Set, limited.d)
			writeProblem(w, http.StatusTooManyRequests, tooManyDetail(limited.d, "from this address"))
			return
		case errors.As(err, &refused):
			w.Header().Set("WWW-Authenticate", `Basic realm="Switchboard River UI", charset="UTF-8"`)
			writeProblem(w, http.StatusUnauthorized, refused.Error())
			return
		case errors.Is(err, errNoCredentials):
			w.Header().Set("WWW-Authenticate", `Basic realm="Switchboard River UI", charset="UTF-8"`)
			writeProblem(w, http.StatusUnauthorized, "log in as an admin: POST /v1/auth/login sets the session cookie, or use HTTP basic auth with an admin's email and password")
			return
		case errors.As(err, new(*credentialsError)):
			w.Header().Set("WWW-Authenticate", `Basic realm="Switchboard River UI", charset="UTF-8"`)
			writeProblem(w, http.StatusUnauthorized, err.Error())
			return
		case err != nil:
			writeInternal(w, r, err)
			return
		case !p.IsAdmin():
			writeProblem(w, http.StatusForbidden, "the River UI is for admins only")
			return
		case !sameOrigin(r):
			writeProblem(w, http.StatusForbidden, "cross-site request refused")
			return
		}
		next.ServeHTTP(w, r)
	})
}

var errNoCredentials = errors.New("no credentials")

// credentialsError is a River UI request whose credentials are wrong.
type credentialsError struct{ msg string }

func (e *credentialsError) Error() string { return e.msg }

// operator authenticates a River UI request: who it is, not yet its role.
func (s *Server) operator(r *http.Request) (Principal, error) {
	if raw, ok := bearerToken(r.Header.Get("Authorization")); ok {
		if strings.HasPrefix(raw, accounts.APIKeyPrefix) {
			return Principal{}, &credentialsError{"the River UI does not take API keys: log in as an admin"}
		}
		p, err := s.tokens.verify(raw)
		if err != nil {
			return Principal{}, &credentialsError{err.Error()}
		}
		return p, nil
	}
	if email, password, ok := r.BasicAuth(); ok {
		return s.basicAuth(r, email, password)
	}
	if c, err := r.Cookie(sessionCookie); err == nil && c.Value != "" {
		p, err := s.tokens.verify(c.Value)
		if err != nil {
			return Principal{}, &credentialsError{"the session has expired; log in again"}
		}
		return p, nil
	}
	return Principal{}, errNoCredentials
}

// limitedError is a password guess refused by the auth rate limit.
type limitedError struct{ d ratelimit.Decision }

func (e *limitedError) Error() string { return "too many login attempts" }

// basicAuth checks an email and password like login does, under the same
// per-address limit as /v1/auth/* (else it would be an unlimited password
// oracle). Successes are cached for a minute so the UI's polling neither runs
// bcrypt nor spends the limit every time; the cache holds who the caller is,
// never the role, which adminOnly reads on every request.
func (s *Server) basicAuth(r *http.Request, email, password string) (Principal, error) {
	ctx := r.Context()
	key := sha256.Sum256([]byte(email + "\x00" + password))
	if p, ok := s.basicCache.get(key); ok {
		return p, nil
	}
	if d := s.allowAuth(ctx, r.RemoteAddr); !d.Allowed {
		return Principal{}, &limitedError{d}
	}
	u, err := s.checkPassword(ctx, email, password)
	var he huma.StatusError
	switch {
	case errors.As(err, &he) && he.GetStatus() == http.StatusUnauthorized:
		return Principal{}, &credentialsError{he.Error()}
	case err != nil:
		return Principal{}, err
	}
	p := Principal{UserID: u.ID}
	s.basicCache.put(key, p)
	return p, nil
}

// sameOrigin refuses state-changing requests a browser sent from another
// site (basic-auth credentials are sent cross-site; the cookie is not).
func sameOrigin(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		return err == nil && u.Host == r.Host
	}
	return true
}

type basicAuthEntry struct {
	p       Principal
	expires time.Time
}

type basicAuthCache struct {
	mu      sync.Mutex
	entries map[[32]byte]basicAuthEntry
}

func (c *basicAuthCache) get(key [32]byte) (Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || time.Now().After(e.expires) {
		return Principal{}, false
	}
	return e.p, true
}

func (c *basicAuthCache) put(key [32]byte, p Principal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= 1000 {
		c.entries = map[[32]byte]basicAuthEntry{}
	}
	c.entries[key] = basicAuthEntry{p: p, expires: time.Now().Add(time.Minute)}
}

// sessionCookieFor is the Set-Cookie value login sends an admin.
func sessionCookieFor(token string, expires time.Time, secure bool) string {
	c := http.Cookie{
		Name: sessionCookie, Value: token, Path: riverUIPath, Expires: expires,
		MaxAge: int(time.Until(expires).Seconds()), HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode,
	}
	return c.String()
}
