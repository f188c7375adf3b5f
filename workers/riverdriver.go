package workers

import (
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// riverDriver is River's pgx driver on pool, with its notifier's LISTEN
// connection taken from listen when that is set: behind a transaction-mode
// pooler the queries go through the pooler and LISTEN goes on a session
// connection. riverpgxv5's listener acquires a connection from the
// driver's pool and hijacks it, so a second driver on the session pool
// supplies it.
func riverDriver(pool, listen *pgxpool.Pool) riverdriver.Driver[pgx.Tx] {
	d := riverpgxv5.New(pool)
	if listen == nil {
		return d
	}
	return &listenDriver{Driver: d, listen: riverpgxv5.New(listen)}
}

type listenDriver struct {
	*riverpgxv5.Driver
	listen *riverpgxv5.Driver
}

// GetListener is the session pool's listener.
func (d *listenDriver) GetListener(params *riverdriver.GetListenenerParams) riverdriver.Listener {
	return d.listen.GetListener(params)
}
