package apiclient

import "context"

// APIKeys lists the caller's keys, newest first, without secrets.
func (c *Client) APIKeys(ctx context.Context) (APIKeyList, error) {
	var l APIKeyList
	return l, c.do(ctx, request{op: OpKeyList, out: &l})
}

// CreateAPIKey makes a key; only a signed-in user's token may (keys
// cannot make keys).
func (c *Client) CreateAPIKey(ctx context.Context, in APIKeyCreate) (APIKeyCreated, error) {
	var k APIKeyCreated
	return k, c.do(ctx, request{op: OpKeyCreate, in: in, out: &k})
}

// RevokeAPIKey revokes a key on every replica from the next request.
func (c *Client) RevokeAPIKey(ctx context.Context, id string) error {
	return c.do(ctx, request{op: OpKeyRevoke, args: []string{id}})
}

// Login signs a person in and returns a user token.
func (c *Client) Login(ctx context.Context, in Credentials) (Session, error) {
	var s Session
	return s, c.do(ctx, request{op: OpLogin, in: in, out: &s})
}

// Logout ends the client's user token on every replica.
func (c *Client) Logout(ctx context.Context) error {
	return c.do(ctx, request{op: OpLogout})
}

// Me returns the account the credential acts as.
func (c *Client) Me(ctx context.Context) (User, error) {
	var u User
	return u, c.do(ctx, request{op: OpMe, out: &u})
}

// NewTicket returns a single-use WebSocket ticket.
func (c *Client) NewTicket(ctx context.Context) (Ticket, error) {
	var t Ticket
	return t, c.do(ctx, request{op: OpTicket, out: &t})
}
