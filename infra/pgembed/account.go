package pgembed

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// account is the unprivileged user postgres runs as when we are root
// (postgres refuses to run as root). nil means "as ourselves".
type account struct {
	name     string
	uid, gid int
}

func runAccount() (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &account{name: name, uid: uid, gid: gid}, nil
	}
	return nil, fmt.Errorf("running as root and neither a postgres nor a nobody account exists: run as a normal user or set DATABASE_URL")
}

// Unprivileged is the credential a server that refuses to run as root
// (postgres, PgBouncer) is started under when we are root: the postgres
// account, or nobody. nil means "as ourselves" (we are not root).
func Unprivileged() (*syscall.Credential, error) {
	acct, err := runAccount()
	if acct == nil || err != nil {
		return nil, err
	}
	return acct.credential(), nil
}

func (a *account) credential() *syscall.Credential {
	return &syscall.Credential{Uid: uint32(a.uid), Gid: uint32(a.gid), NoSetGroups: true}
}

// dataDir picks where pgdata lives. Normally dir/pgdata; when we are root and
// the postgres account cannot reach dir (e.g. under /root, mode 0700), a
// directory under /var/lib/switchboard named by dir's hash, recorded in
// dir/pgdata.location so restarts find it.
func dataDir(dir string, acct *account) (string, error) {
	pgdata := filepath.Join(dir, "pgdata")
	if acct == nil {
		return pgdata, nil
	}
	// Traversable, not owned: the postgres account must reach dir/pgdata but
	// must not be able to replace the secrets we keep beside it.
	if err := os.Chmod(dir, 0o711); err != nil {
		return "", fmt.Errorf("chmod %s: %w", dir, err)
	}
	if reachable(filepath.Dir(dir), acct) {
		return pgdata, nil
	}
	sum := sha256.Sum256([]byte(dir))
	alt := filepath.Join("/var/lib/switchboard", hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(alt, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", alt, err)
	}
	if err := os.Chown(alt, acct.uid, acct.gid); err != nil {
		return "", fmt.Errorf("chown %s: %w", alt, err)
	}
	_ = os.WriteFile(filepath.Join(dir, "pgdata.location"), []byte(alt+"/pgdata\n"), 0o600)
	return filepath.Join(alt, "pgdata"), nil
}

// reachable reports whether acct may traverse every directory from / to dir.
func reachable(dir string, acct *account) bool {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return true
		}
		mode := fi.Mode().Perm()
		var can bool
		switch {
		case int(st.Uid) == acct.uid:
			can = mode&0o100 != 0
		case int(st.Gid) == acct.gid:
			can = mode&0o010 != 0
		default:
			can = mode&0o001 != 0
		}
		if !can {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}
