package capgate_test

// Tests against the real shared stack (scripts/stack.py): the real gateway, the example upstream
// and Redis. They skip, saying why, when .run/stack.json is absent.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/capgate/capgate/clients/go/capgate"
	"github.com/capgate/capgate/clients/go/capgatev1"
	"github.com/capgate/capgate/clients/go/internal/stacktest"
)

// Refunds go to o-1003: its total (2^53+1 cents) never runs out, however often the four client
// suites run against one stack.
const refundOrder = "o-1003"

func dial(t *testing.T, target string, opts ...capgate.Option) *capgate.Client {
	t.Helper()
	c, err := capgate.Dial(target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func agent(t *testing.T) (*stacktest.Stack, *capgate.Client) {
	s := stacktest.Load(t)
	return s, dial(t, s.Agents, capgate.WithBearerToken(s.Tokens["alice"]))
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func invoke(t *testing.T, c *capgate.Client, capability string, input map[string]any, opts ...capgate.CallOption) *capgate.Result {
	t.Helper()
	res, err := c.Invoke(timeout(t, 10*time.Second), capability, input, opts...)
	if err != nil {
		t.Fatalf("%s: %v", capability, err)
	}
	return res
}

func wantFailed(t *testing.T, res *capgate.Result, code capgatev1.ErrorCode) *capgate.Error {
	t.Helper()
	f, ok := res.Outcome.(*capgate.Failed)
	if !ok {
		t.Fatalf("want Failed %s, got %T %+v", capgate.CodeName(code), res.Outcome, res.Outcome)
	}
	var ce *capgate.Error
	if !errors.As(error(res.Err()), &ce) || ce.Code != code || f.Err.Code != code {
		t.Fatalf("want %s, got %v", capgate.CodeName(code), f.Err)
	}
	return f.Err
}

func TestDescribeShowsVisibleCapabilitiesWithSchemas(t *testing.T) {
	_, c := agent(t)
	cat, err := c.Describe(timeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	refund := cat.Find("orders.refund")
	if refund == nil || refund.SideEffect != "write" || cat.Revision == "" {
		t.Fatalf("orders.refund missing or incomplete: %+v (revision %q)", refund, cat.Revision)
	}
	props, _ := refund.InputSchema["properties"].(map[string]any)
	if _, ok := props["amount"]; !ok {
		t.Fatalf("the input schema is decoded: %v", refund.InputSchema)
	}
	// Hidden from non-admins exactly like a capability that does not exist (SI-8).
	if cat.Find("admin.orders.purge") != nil {
		t.Fatal("admin.orders.purge must be hidden from alice")
	}
	only, err := c.Describe(timeout(t, 10*time.Second), "orders.get")
	if err != nil || len(only.Capabilities) != 1 || only.Capabilities[0].ID != "orders.get" {
		t.Fatalf("filtered describe: %+v, %v", only, err)
	}
}

func TestInvokeCompletedReturnsRedactedOutputAsMap(t *testing.T) {
	_, c := agent(t)
	res := invoke(t, c, "orders.get", map[string]any{"order_id": "o-1001"})
	done, ok := res.Outcome.(*capgate.Completed)
	if !ok {
		t.Fatalf("want Completed, got %T %v", res.Outcome, res.Err())
	}
	if done.Output["order_id"] != "o-1001" || res.ExecutionID == "" ||
		res.ExecutionState != capgatev1.ExecutionState_EXECUTION_STATE_COMPLETED || res.Duration <= 0 {
		t.Fatalf("unexpected envelope: %+v output %v", res, done.Output)
	}
	refund := invoke(t, c, "orders.refund", map[string]any{"order_id": refundOrder, "amount": 5})
	out, ok := refund.Outcome.(*capgate.Completed)
	if !ok || out.Output["card_last4"] != "****" {
		t.Fatalf("refund output must be masked: %T %v", refund.Outcome, refund.Outcome)
	}
	var typed struct {
		OrderID string  `json:"order_id"`
		Amount  float64 `json:"amount"`
	}
	if err := out.Decode(&typed); err != nil || typed.OrderID != refundOrder || typed.Amount != 5 {
		t.Fatalf("Decode into a struct: %+v, %v", typed, err)
	}
}

func TestInvokeDeniedByPolicy(t *testing.T) {
	_, c := agent(t)
	res := invoke(t, c, "orders.refund", map[string]any{"order_id": refundOrder, "amount": 50000})
	e := wantFailed(t, res, capgatev1.ErrorCode_ERROR_CODE_POLICY_DENIED)
	if e.Stage != "policy" || e.Message == "" ||
		res.ExecutionState != capgatev1.ExecutionState_EXECUTION_STATE_NOT_STARTED {
		t.Fatalf("denial: %+v state %v", e, res.ExecutionState)
	}
}

func TestInvokeInvalidInputNamesThePath(t *testing.T) {
	_, c := agent(t)
	res := invoke(t, c, "orders.refund", map[string]any{"order_id": "o-1001", "amount": "x"})
	e := wantFailed(t, res, capgatev1.ErrorCode_ERROR_CODE_INPUT_INVALID)
	if len(e.Issues) == 0 || e.Issues[0].Path != "$.amount" {
		t.Fatalf("want an issue at $.amount, got %+v", e.Issues)
	}
}

func TestHiddenCapabilityIsNotFound(t *testing.T) {
	_, c := agent(t)
	wantFailed(t, invoke(t, c, "admin.orders.purge", nil), capgatev1.ErrorCode_ERROR_CODE_CAPABILITY_NOT_FOUND)
}

func TestApprovalFlowEndToEnd(t *testing.T) {
	s, c := agent(t)
	res := invoke(t, c, "orders.refund", map[string]any{"order_id": refundOrder, "amount": 800, "reason": "damaged"},
		capgate.CorrelationID("go-approval-flow"))
	pending, ok := res.Outcome.(*capgate.ApprovalRequired)
	if !ok {
		t.Fatalf("want ApprovalRequired, got %T %v", res.Outcome, res.Err())
	}
	a := pending.Approval
	if a.ID == "" || len(a.InputHash) != 64 || !a.Pending() {
		t.Fatalf("approval: %+v", a)
	}

	// Before a decision, waiting with a deadline ends with APPROVAL_PENDING, not a hang.
	_, err := c.WaitForApproval(timeout(t, 2*time.Second), a.ID) // long enough for the first answer on a loaded machine
	var ce *capgate.Error
	if !errors.As(err, &ce) || ce.Code != capgatev1.ErrorCode_ERROR_CODE_APPROVAL_PENDING ||
		!errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want APPROVAL_PENDING at the deadline, got %v", err)
	}

	// Resuming before the decision is refused inside the envelope and runs nothing.
	early, err := c.Resume(timeout(t, 10*time.Second), a.ID)
	if err != nil || early.Err() == nil || early.ExecutionState != capgatev1.ExecutionState_EXECUTION_STATE_NOT_STARTED {
		t.Fatalf("early resume: %+v, %v", early, err)
	}

	// bob decides on the admin listener, against the input hash he saw.
	admin := dial(t, s.Admin, capgate.WithBearerToken(s.Tokens["bob"]))
	go func() {
		time.Sleep(200 * time.Millisecond) // decide while alice is waiting
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = capgatev1.NewApprovalAdminClient(admin.Conn()).DecideApproval(admin.Context(ctx),
			&capgatev1.DecideApprovalRequest{ApprovalId: a.ID, Verdict: capgatev1.Verdict_VERDICT_APPROVE,
				InputHash: a.InputHash, Note: "ok"})
	}()
	decided, err := c.WaitForApproval(timeout(t, 15*time.Second), a.ID)
	if err != nil || !decided.Approved() {
		t.Fatalf("want approved, got %+v, %v", decided, err)
	}

	done, err := c.Resume(timeout(t, 10*time.Second), a.ID, capgate.CorrelationID("go-approval-flow"))
	if err != nil {
		t.Fatal(err)
	}
	out, ok := done.Outcome.(*capgate.Completed)
	if !ok || out.Output["order_id"] != refundOrder || done.ApprovalID != a.ID {
		t.Fatalf("want the refund completed, got %T %v", done.Outcome, done.Err())
	}
	// A repeated Resume returns the stored envelope: the upstream ran once.
	again, err := c.Resume(timeout(t, 10*time.Second), a.ID)
	if err != nil || again.ExecutionID != done.ExecutionID {
		t.Fatalf("repeat resume must return the stored envelope: %+v, %v", again, err)
	}
	ran := 0
	for _, rec := range s.UpstreamCalls(t) {
		if rec.ApprovalID == a.ID && rec.Method == "/orders.v1.Orders/RefundOrder" {
			ran++
			if !rec.ActorTokenPresent {
				t.Fatalf("the upstream call lacks the forwarded context: %+v", rec)
			}
		}
	}
	if ran != 1 {
		t.Fatalf("the approved refund must reach the upstream exactly once, got %d", ran)
	}
	final, err := c.GetApproval(timeout(t, 10*time.Second), a.ID)
	if err != nil || final.Status != capgatev1.ApprovalStatus_APPROVAL_STATUS_EXECUTED {
		t.Fatalf("approval after resume: %+v, %v", final, err)
	}
}

func TestIdempotencyKeyReturnsTheRecordedResult(t *testing.T) {
	_, c := agent(t)
	key := fmt.Sprintf("go-idem-%d", time.Now().UnixNano())
	input := map[string]any{"order_id": refundOrder, "amount": 3}
	first := invoke(t, c, "orders.refund", input, capgate.IdempotencyKey(key))
	second := invoke(t, c, "orders.refund", input, capgate.IdempotencyKey(key))
	a, okA := first.Outcome.(*capgate.Completed)
	b, okB := second.Outcome.(*capgate.Completed)
	if !okA || !okB || a.Output["refund_id"] != b.Output["refund_id"] {
		t.Fatalf("same key and input must return the recorded refund: %v / %v", first.Outcome, second.Outcome)
	}
	other := invoke(t, c, "orders.refund", map[string]any{"order_id": refundOrder, "amount": 4}, capgate.IdempotencyKey(key))
	wantFailed(t, other, capgatev1.ErrorCode_ERROR_CODE_IDEMPOTENCY_CONFLICT)
}

func TestCapabilityTimeoutIsCancelledTimeout(t *testing.T) {
	_, c := agent(t)
	res := invoke(t, c, "orders.cancel", map[string]any{"order_id": "slow-2000"})
	cancelled, ok := res.Outcome.(*capgate.Cancelled)
	if !ok || cancelled.Err.Code != capgatev1.ErrorCode_ERROR_CODE_TIMEOUT {
		t.Fatalf("want Cancelled TIMEOUT, got %T %v", res.Outcome, res.Err())
	}
	if res.ExecutionState != capgatev1.ExecutionState_EXECUTION_STATE_UNKNOWN {
		t.Fatalf("after a timeout the effect is unknown, got %v", res.ExecutionState)
	}
}

func TestCancellingTheContextMidFlightIsCancelled(t *testing.T) {
	s, c := agent(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	key := fmt.Sprintf("go-cancel-%d", start.UnixNano()) // finds this call in the upstream's log
	_, err := c.Invoke(ctx, "orders.get", map[string]any{"order_id": "slow-3000"}, capgate.IdempotencyKey(key))
	var ce *capgate.Error
	if !errors.As(err, &ce) || ce.Code != capgatev1.ErrorCode_ERROR_CODE_CANCELLED || !errors.Is(err, context.Canceled) {
		t.Fatalf("want CANCELLED, got %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("cancellation must not wait for the upstream")
	}
	// The cancellation propagates: the upstream sees its call cancelled, well before 3 s.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var seen *stacktest.CallRecord
		for _, rec := range s.UpstreamCalls(t) {
			if rec.IdempotencyKey == key {
				seen = &rec
			}
		}
		if seen != nil && seen.Cancelled {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream did not see the cancellation: %+v", seen)
		}
	}
}

func TestCallerDeadlineIsTimeout(t *testing.T) {
	_, c := agent(t)
	res, err := c.Invoke(timeout(t, 300*time.Millisecond), "orders.get", map[string]any{"order_id": "slow-3000"})
	// The gateway keeps a margin before the caller's deadline, so it normally answers with a
	// governed TIMEOUT; if the transport deadline wins the race the error carries TIMEOUT too.
	if err != nil {
		var ce *capgate.Error
		if !errors.As(err, &ce) || ce.Code != capgatev1.ErrorCode_ERROR_CODE_TIMEOUT || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("want TIMEOUT, got %v", err)
		}
		return
	}
	if cancelled, ok := res.Outcome.(*capgate.Cancelled); !ok || cancelled.Err.Code != capgatev1.ErrorCode_ERROR_CODE_TIMEOUT {
		t.Fatalf("want Cancelled TIMEOUT, got %T %v", res.Outcome, res.Err())
	}
}

func TestBadTokenIsUnauthenticated(t *testing.T) {
	s := stacktest.Load(t)
	c := dial(t, s.Agents, capgate.WithBearerToken(s.Tokens["bob"])) // audience capgate-admin
	_, err := c.Describe(timeout(t, 10*time.Second))
	var ce *capgate.Error
	if !errors.As(err, &ce) || ce.Code != capgatev1.ErrorCode_ERROR_CODE_UNAUTHENTICATED || ce.GRPCCode != codes.Unauthenticated {
		t.Fatalf("want UNAUTHENTICATED, got %v", err)
	}
}

func TestUnixSocketWithTrustedLocalActor(t *testing.T) {
	s := stacktest.Load(t)
	c := dial(t, "unix://"+s.LocalSocket,
		capgate.WithTrustedLocal(capgate.Actor{ID: "checkout-svc", Kind: "service", Roles: []string{"agent"}}))
	res := invoke(t, c, "orders.get", map[string]any{"order_id": "o-1002"})
	done, ok := res.Outcome.(*capgate.Completed)
	if !ok || done.Output["order_id"] != "o-1002" {
		t.Fatalf("want Completed over the unix socket, got %T %v", res.Outcome, res.Err())
	}
}
