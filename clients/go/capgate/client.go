// Package capgate is a thin Go client for the capgate capability gateway: Describe, Invoke,
// Resume and WaitForApproval over the generated stubs in package capgatev1, with inputs and
// outputs as JSON-backed Go maps and the result envelope as a Go type switch.
//
//	c, err := capgate.Dial("127.0.0.1:7443", capgate.WithBearerToken(jwt))
//	res, err := c.Invoke(ctx, "orders.get", map[string]any{"order_id": "o-1001"})
//	switch o := res.Outcome.(type) {
//	case *capgate.Completed:        // o.Output
//	case *capgate.ApprovalRequired: // o.Approval.ID; later c.WaitForApproval, c.Resume
//	case *capgate.Failed:           // o.Err.Code
//	case *capgate.Cancelled:        // o.Err.Code (TIMEOUT or CANCELLED)
//	}
//
// Governed failures come back inside the envelope (Failed, Cancelled); transport faults are
// returned as errors of type *Error, so errors.As(err, &capErr) always gives the ErrorCode.
package capgate

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/capgate/capgate/clients/go/capgatev1"
)

// Actor is an identity asserted with trusted-local metadata (unix-socket listeners only).
type Actor struct {
	ID    string
	Kind  string // user (default), service, agent or anonymous
	Roles []string
}

type config struct {
	tls      *tls.Config
	bearer   string
	local    *Actor
	dialOpts []grpc.DialOption
}

// Option configures a Client.
type Option func(*config)

// WithTLS dials with TLS (server verification per cfg; add a client certificate for mTLS).
// Without it the connection is plaintext: use that only on loopback or a unix socket.
func WithTLS(cfg *tls.Config) Option { return func(c *config) { c.tls = cfg } }

// WithBearerToken sends "authorization: Bearer <token>" on every call (jwt listeners).
func WithBearerToken(token string) Option { return func(c *config) { c.bearer = token } }

// WithTrustedLocal asserts the actor with x-capgate-actor-* metadata (trusted-local listeners,
// which exist only on unix sockets).
func WithTrustedLocal(a Actor) Option { return func(c *config) { c.local = &a } }

// WithDialOptions passes extra grpc dial options (interceptors, keepalive, ...).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) { c.dialOpts = append(c.dialOpts, opts...) }
}

// Client calls the CapabilityGateway service. It is safe for concurrent use.
type Client struct {
	conn *grpc.ClientConn
	stub capgatev1.CapabilityGatewayClient
	md   metadata.MD
}

// Dial connects to a gateway listener: "host:port" or "unix:///abs/path.sock". Like
// grpc.NewClient it does not block; the first call connects.
func Dial(target string, opts ...Option) (*Client, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.bearer != "" && cfg.local != nil {
		return nil, errors.New("capgate: choose a bearer token or a trusted-local actor, not both")
	}
	creds := insecure.NewCredentials()
	if cfg.tls != nil {
		creds = credentials.NewTLS(cfg.tls)
	}
	dialOpts := append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, cfg.dialOpts...)
	conn, err := grpc.NewClient(target, dialOpts...)
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, stub: capgatev1.NewCapabilityGatewayClient(conn), md: callMetadata(cfg)}, nil
}

func callMetadata(cfg config) metadata.MD {
	md := metadata.MD{}
	if cfg.bearer != "" {
		md.Set("authorization", "Bearer "+cfg.bearer)
	}
	if a := cfg.local; a != nil {
		md.Set("x-capgate-actor-id", a.ID)
		if a.Kind != "" {
			md.Set("x-capgate-actor-kind", a.Kind)
		}
		if len(a.Roles) > 0 {
			md.Set("x-capgate-actor-roles", strings.Join(a.Roles, ","))
		}
	}
	return md
}

// Conn is the underlying connection, for the other services of the same listener (for example
// capgatev1.NewApprovalAdminClient on an admin listener). Calls on it carry no credentials
// unless made with c.Context.
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// Context returns ctx with this client's credentials metadata attached, for calls made
// directly on the generated stubs over Conn().
func (c *Client) Context(ctx context.Context) context.Context {
	if len(c.md) == 0 {
		return ctx
	}
	return metadata.NewOutgoingContext(ctx, metadata.Join(c.md, outgoing(ctx)))
}

func outgoing(ctx context.Context) metadata.MD {
	md, _ := metadata.FromOutgoingContext(ctx)
	return md
}

// Close releases the connection.
func (c *Client) Close() error { return c.conn.Close() }
