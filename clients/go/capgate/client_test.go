package capgate_test

// Unit tests against an in-process fake gateway: what the wrapper sends and how it maps every
// envelope outcome and transport fault. They need no stack.

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/capgate/capgate/clients/go/capgate"
	"github.com/capgate/capgate/clients/go/capgatev1"
)

type fakeGateway struct {
	capgatev1.UnimplementedCapabilityGatewayServer
	seen    chan metadata.MD
	request chan *capgatev1.InvokeRequest
}

func (f *fakeGateway) Invoke(ctx context.Context, req *capgatev1.InvokeRequest) (*capgatev1.ExecutionResult, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.seen <- md
	f.request <- req
	res := &capgatev1.ExecutionResult{ExecutionId: "exe-1", CapabilityId: req.GetCapabilityId()}
	switch req.GetCapabilityId() {
	case "completed":
		res.Outcome = &capgatev1.ExecutionResult_Completed{Completed: &capgatev1.Completed{OutputJson: `{"n":1,"s":"x"}`}}
	case "approval":
		res.Outcome = &capgatev1.ExecutionResult_ApprovalRequired{ApprovalRequired: &capgatev1.ApprovalRequired{
			Approval: &capgatev1.Approval{Id: "apr-1", Status: capgatev1.ApprovalStatus_APPROVAL_STATUS_PENDING, InputHash: "ab"}}}
	case "failed":
		res.Outcome = &capgatev1.ExecutionResult_Failed{Failed: &capgatev1.CapabilityError{
			Code: capgatev1.ErrorCode_ERROR_CODE_INPUT_INVALID, Stage: "input-validation", Message: "bad",
			Issues: []*capgatev1.Issue{{Path: "$.amount", Message: "must be a number"}}}}
	case "rate-limited":
		res.Outcome = &capgatev1.ExecutionResult_Failed{Failed: &capgatev1.CapabilityError{
			Code: capgatev1.ErrorCode_ERROR_CODE_RATE_LIMITED, Stage: "limits", Retryable: true,
			RetryAfter: durationpb.New(2500 * time.Millisecond)}}
	case "cancelled":
		res.Outcome = &capgatev1.ExecutionResult_Cancelled{Cancelled: &capgatev1.CapabilityError{
			Code: capgatev1.ErrorCode_ERROR_CODE_TIMEOUT, Stage: "timeout", Retryable: true}}
	case "unauthenticated":
		return nil, status.Error(codes.Unauthenticated, "token expired")
	}
	return res, nil
}

func fake(t *testing.T, opts ...capgate.Option) (*fakeGateway, *capgate.Client) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeGateway{seen: make(chan metadata.MD, 1), request: make(chan *capgatev1.InvokeRequest, 1)}
	srv := grpc.NewServer()
	capgatev1.RegisterCapabilityGatewayServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return f, dial(t, lis.Addr().String(), opts...)
}

func call(t *testing.T, c *capgate.Client, capability string, opts ...capgate.CallOption) (*capgate.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Invoke(ctx, capability, map[string]any{"amount": 5}, opts...)
}

func TestBearerTokenAndOptionsAreSent(t *testing.T) {
	f, c := fake(t, capgate.WithBearerToken("tok"))
	if _, err := call(t, c, "completed", capgate.IdempotencyKey("k1"), capgate.CorrelationID("c1"),
		capgate.Metadata(map[string]string{"ticket": "T-1"})); err != nil {
		t.Fatal(err)
	}
	md, req := <-f.seen, <-f.request
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer tok" {
		t.Fatalf("authorization: %v", got)
	}
	if req.GetIdempotencyKey() != "k1" || req.GetCorrelationId() != "c1" || req.GetMetadata()["ticket"] != "T-1" ||
		string(req.GetInputJson()) != `{"amount":5}` {
		t.Fatalf("request: %v", req)
	}
}

func TestTrustedLocalActorIsSentAsMetadata(t *testing.T) {
	f, c := fake(t, capgate.WithTrustedLocal(capgate.Actor{ID: "svc", Kind: "service", Roles: []string{"a", "b"}}))
	if _, err := call(t, c, "completed"); err != nil {
		t.Fatal(err)
	}
	md := <-f.seen
	<-f.request
	if md.Get("x-capgate-actor-id")[0] != "svc" || md.Get("x-capgate-actor-kind")[0] != "service" ||
		md.Get("x-capgate-actor-roles")[0] != "a,b" || len(md.Get("authorization")) != 0 {
		t.Fatalf("metadata: %v", md)
	}
}

func TestBearerAndTrustedLocalAreExclusive(t *testing.T) {
	if _, err := capgate.Dial("127.0.0.1:1", capgate.WithBearerToken("t"), capgate.WithTrustedLocal(capgate.Actor{ID: "x"})); err == nil {
		t.Fatal("both credentials at once must be refused")
	}
}

func TestEveryOutcomeMapsToItsType(t *testing.T) {
	f, c := fake(t)
	drain := func() { <-f.seen; <-f.request }

	res, err := call(t, c, "completed")
	drain()
	if done, ok := res.Outcome.(*capgate.Completed); err != nil || !ok || done.Output["s"] != "x" || done.Output["n"] != 1.0 || res.Err() != nil {
		t.Fatalf("completed: %+v, %v", res, err)
	}
	res, _ = call(t, c, "approval")
	drain()
	if a, ok := res.Outcome.(*capgate.ApprovalRequired); !ok || a.Approval.ID != "apr-1" || !a.Approval.Pending() {
		t.Fatalf("approval: %+v", res.Outcome)
	}
	res, _ = call(t, c, "failed")
	drain()
	var ce *capgate.Error
	if f, ok := res.Outcome.(*capgate.Failed); !ok || !errors.As(error(res.Err()), &ce) ||
		f.Err.Code != capgatev1.ErrorCode_ERROR_CODE_INPUT_INVALID || ce.Issues[0].Path != "$.amount" {
		t.Fatalf("failed: %+v", res.Outcome)
	}
	if ce.Error() != "capgate: INPUT_INVALID (input-validation): bad; $.amount must be a number" {
		t.Fatalf("message: %q", ce.Error())
	}
	res, _ = call(t, c, "rate-limited")
	drain()
	if f, ok := res.Outcome.(*capgate.Failed); !ok || f.Err.Code != capgatev1.ErrorCode_ERROR_CODE_RATE_LIMITED ||
		!f.Err.Retryable || f.Err.RetryAfter != 2500*time.Millisecond {
		t.Fatalf("rate limited: %+v", res.Outcome)
	}
	res, _ = call(t, c, "cancelled")
	drain()
	if cl, ok := res.Outcome.(*capgate.Cancelled); !ok || cl.Err.Code != capgatev1.ErrorCode_ERROR_CODE_TIMEOUT || !cl.Err.Retryable {
		t.Fatalf("cancelled: %+v", res.Outcome)
	}
}

func TestTransportUnauthenticatedKeepsTheCode(t *testing.T) {
	f, c := fake(t)
	_, err := call(t, c, "unauthenticated")
	<-f.seen
	<-f.request
	var ce *capgate.Error
	if !errors.As(err, &ce) || ce.Code != capgatev1.ErrorCode_ERROR_CODE_UNAUTHENTICATED || ce.GRPCCode != codes.Unauthenticated {
		t.Fatalf("want UNAUTHENTICATED, got %v", err)
	}
}

func TestUnencodableInputIsRefusedLocally(t *testing.T) {
	_, c := fake(t)
	if _, err := c.Invoke(context.Background(), "completed", map[string]any{"f": func() {}}); err == nil {
		t.Fatal("a function is not JSON")
	}
}
