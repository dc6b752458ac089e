// Package upstream is the server-side helper for services that capgate calls: a gRPC unary
// interceptor that verifies the gateway-signed actor token (x-capgate-actor-token), checks that
// the x-capgate-* call metadata agrees with it, and hands the handler an AgentContext.
//
//	v, _ := actortoken.LoadVerifier("/shared/capgate-jwks.json", "capgate", "orders")
//	srv := grpc.NewServer(grpc.UnaryInterceptor(upstream.UnaryServerInterceptor(v)))
//	...
//	func (s *server) RefundOrder(ctx context.Context, r *pb.RefundOrderRequest) (*pb.Refund, error) {
//		ac := upstream.MustFromContext(ctx) // ac.Actor.ID, ac.ExecutionID, ac.IdempotencyKey, ...
//
// A call without a valid token is refused with codes.Unauthenticated before the handler runs.
package upstream

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/capgate/capgate/clients/go/actortoken"
)

// Metadata keys the gateway sends with every upstream call (gateway/pipeline/stages/invoke.py).
const (
	MDActorToken     = "x-capgate-actor-token"
	MDExecutionID    = "x-capgate-execution-id"
	MDCapability     = "x-capgate-capability"
	MDSurface        = "x-capgate-surface"
	MDIdempotencyKey = "x-capgate-idempotency-key"
	MDCorrelationID  = "x-capgate-correlation-id"
	MDApprovalID     = "x-capgate-approval-id"
	MDTraceparent    = "traceparent"
)

// Actor is the identity the gateway authenticated; identity is the pair (Issuer, ID).
type Actor struct {
	ID     string
	Issuer string
	Kind   string // user, service, agent or anonymous
	Roles  []string
}

// HasRole reports whether the actor holds role.
func (a Actor) HasRole(role string) bool {
	for _, r := range a.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// AgentContext is what the gateway tells an upstream about the call it forwards.
type AgentContext struct {
	Actor       Actor
	ExecutionID string // the same for every retry of one execution
	Capability  string
	Surface     string
	// IdempotencyKey is the caller's key, else the execution id: deduplicate effects on it.
	IdempotencyKey string
	CorrelationID  string
	ApprovalID     string // set on a resumed, approved execution
	Approver       string // who approved it
	Traceparent    string
	Claims         *actortoken.Claims
}

type ctxKey struct{}

// FromContext returns the AgentContext the interceptor stored, if any.
func FromContext(ctx context.Context) (*AgentContext, bool) {
	ac, ok := ctx.Value(ctxKey{}).(*AgentContext)
	return ac, ok
}

// MustFromContext is FromContext for handlers behind the interceptor; it panics without one.
func MustFromContext(ctx context.Context) *AgentContext {
	ac, ok := FromContext(ctx)
	if !ok {
		panic("upstream: no AgentContext: is UnaryServerInterceptor installed?")
	}
	return ac
}

// NewContext returns ctx carrying ac (handler tests).
func NewContext(ctx context.Context, ac *AgentContext) context.Context {
	return context.WithValue(ctx, ctxKey{}, ac)
}

// Option configures the interceptor.
type Option func(*options)

type options struct{ skip []string }

// SkipMethods lets full method names with these prefixes through without a token (for example
// "/grpc.health.v1.Health/"); they get no AgentContext.
func SkipMethods(prefixes ...string) Option {
	return func(o *options) { o.skip = append(o.skip, prefixes...) }
}

// UnaryServerInterceptor verifies every call's actor token with v.
func UnaryServerInterceptor(v *actortoken.Verifier, opts ...Option) grpc.UnaryServerInterceptor {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		for _, p := range o.skip {
			if strings.HasPrefix(info.FullMethod, p) {
				return handler(ctx, req)
			}
		}
		md, _ := metadata.FromIncomingContext(ctx)
		ac, err := Extract(v, md)
		if err != nil {
			return nil, status.Error(codes.Unauthenticated, err.Error())
		}
		return handler(NewContext(ctx, ac), req)
	}
}

// ErrMismatch: the call metadata names another execution, capability, surface or approval than
// the signed token (metadata is not signed; the token is what counts).
var ErrMismatch = errors.New("actor token does not match the call metadata")

// ErrMissingMetadata: a token that names no execution (the gateway reuses tokens across
// executions) came without x-capgate-execution-id or x-capgate-capability beside it.
var ErrMissingMetadata = errors.New("actor token without execution id and capability metadata")

// Extract verifies the token in md and builds the AgentContext (for custom interceptors).
// Errors carry a fixed reason only, never token contents.
func Extract(v *actortoken.Verifier, md metadata.MD) (*AgentContext, error) {
	tokens := md.Get(MDActorToken)
	if len(tokens) != 1 {
		return nil, errors.New("actor token missing or repeated")
	}
	claims, err := v.Verify(tokens[0])
	if err != nil {
		return nil, err
	}
	one := func(key string) (string, bool) {
		vals := md.Get(key)
		if len(vals) > 1 {
			return "", false
		}
		if len(vals) == 0 {
			return "", true
		}
		return vals[0], true
	}
	ac := &AgentContext{
		Actor:       Actor{ID: claims.Subject, Issuer: claims.ActorIssuer, Kind: claims.Kind, Roles: claims.Roles},
		ExecutionID: claims.ExecutionID, Capability: claims.Capability, Surface: claims.Surface,
		ApprovalID: claims.ApprovalID, Approver: claims.Approver, Claims: claims,
	}
	// Where the metadata repeats a signed claim it must agree with it.
	signed := map[string]string{MDSurface: claims.Surface, MDApprovalID: claims.ApprovalID}
	for key, want := range signed {
		got, ok := one(key)
		if !ok || (got != want && got != "") {
			return nil, ErrMismatch
		}
	}
	// A token signed before reuse names its execution: the header must be there and agree.
	// A reused token names none: the execution id and capability come from the metadata.
	execID, okE := one(MDExecutionID)
	capID, okC := one(MDCapability)
	if !okE || !okC || (claims.ExecutionID != "" && execID != claims.ExecutionID) ||
		(claims.Capability != "" && capID != "" && capID != claims.Capability) {
		return nil, ErrMismatch
	}
	if ac.ExecutionID == "" {
		ac.ExecutionID = execID
	}
	if ac.Capability == "" {
		ac.Capability = capID
	}
	if ac.ExecutionID == "" || ac.Capability == "" {
		return nil, ErrMissingMetadata
	}
	var ok1, ok2, ok3 bool
	ac.IdempotencyKey, ok1 = one(MDIdempotencyKey)
	ac.CorrelationID, ok2 = one(MDCorrelationID)
	ac.Traceparent, ok3 = one(MDTraceparent)
	if !ok1 || !ok2 || !ok3 {
		return nil, ErrMismatch
	}
	if ac.IdempotencyKey == "" {
		ac.IdempotencyKey = ac.ExecutionID // the gateway's own default (seed 001)
	}
	return ac, nil
}
