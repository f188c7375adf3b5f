package cli

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/switchboard/switchboard/cmd/switchboard/internal/apiclient"
)

// Environment variables the command line reads.
const (
	EnvURL     = "SWITCHBOARD_URL"
	EnvAPIKey  = "SWITCHBOARD_API_KEY"
	EnvProject = "SWITCHBOARD_PROJECT"
)

// login is what `switchboard login` stores: a server, an API key for it
// and, optionally, a project.
type login struct {
	URL     string `json:"url"`
	APIKey  string `json:"api_key"`
	KeyID   string `json:"key_id,omitempty"` // the key's id, to revoke it at logout
	Project string `json:"project,omitempty"`
}

// loginPath is the stored login's file in the user's config directory.
func (a *app) loginPath() (string, error) {
	dir, err := a.io.ConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the config directory: %w", err)
	}
	return filepath.Join(dir, "switchboard", "login.json"), nil
}

// storedLogin reads the stored login; none stored is a zero login.
func (a *app) storedLogin() (login, error) {
	var l login
	path, err := a.loginPath()
	if err != nil {
		return l, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return l, fmt.Errorf("read the stored login: %w", err)
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("read the stored login %s: %w", path, err)
	}
	return l, nil
}

// storeLogin writes l readable by its owner only (0600, in a 0700
// directory), replacing the file whole.
func (a *app) storeLogin(l login) (string, error) {
	path, err := a.loginPath()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("store the login: %w", err)
	}
	b, _ := json.MarshalIndent(l, "", "  ")
	tmp, err := os.CreateTemp(filepath.Dir(path), ".login-*")
	if err != nil {
		return "", fmt.Errorf("store the login: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", fmt.Errorf("store the login: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return "", fmt.Errorf("store the login: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("store the login: %w", err)
	}
	return path, os.Rename(tmp.Name(), path)
}

// settings resolve the server, key and project: flags, then the
// environment, then the stored login.
func (a *app) settings() (login, error) {
	stored, err := a.storedLogin()
	if err != nil {
		return login{}, err
	}
	s := login{URL: cmp.Or(a.url, a.io.Getenv(EnvURL), stored.URL)}
	if s.URL != stored.URL { // the stored key is only ever sent to its own server
		stored = login{}
	}
	s.APIKey = cmp.Or(a.io.Getenv(EnvAPIKey), stored.APIKey)
	s.Project = cmp.Or(a.project, a.io.Getenv(EnvProject), stored.Project)
	if s.URL == "" || s.APIKey == "" {
		return s, usageError{fmt.Errorf("no server or API key: set %s and %s, or run switchboard login", EnvURL, EnvAPIKey)}
	}
	return s, nil
}

// client is an API client with the resolved settings.
func (a *app) client() (*apiclient.Client, error) {
	s, err := a.settings()
	if err != nil {
		return nil, err
	}
	return &apiclient.Client{BaseURL: s.URL, Token: s.APIKey, Project: s.Project}, nil
}
