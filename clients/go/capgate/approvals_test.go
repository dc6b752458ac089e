package capgate_test

// Issue 28's approvals on the shared stack (tests/stack/): a call a standing grant covers shows
// the grant, a resumed call whose approver edited it shows the edit and its patch, and a
// two-person approval shows its progress ("1 of 2"). They skip, saying why, without the stack.

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/capgate/capgate/clients/go/capgate"
	"github.com/capgate/capgate/clients/go/capgatev1"
)

// decide sends one approver's decision on the admin listener with the raw ApprovalAdmin stub (the
// Go client wraps callers only) and returns the approval the gateway answers with.
func decide(t *testing.T, admin *capgate.Client, req *capgatev1.DecideApprovalRequest) *capgatev1.Approval {
	t.Helper()
	resp, err := capgatev1.NewApprovalAdminClient(admin.Conn()).DecideApproval(admin.Context(timeout(t, 10*time.Second)), req)
	if err != nil || resp.GetError() != nil {
		t.Fatalf("decide %s: %v %v", req.GetApprovalId(), err, resp.GetError())
	}
	return resp.GetApproval()
}

func pendingApproval(t *testing.T, res *capgate.Result) *capgate.Approval {
	t.Helper()
	pending, ok := res.Outcome.(*capgate.ApprovalRequired)
	if !ok {
		t.Fatalf("want ApprovalRequired, got %T %v", res.Outcome, res.Err())
	}
	return pending.Approval
}

func TestCallCoveredByAGrantRunsAtOnceAndShowsTheGrant(t *testing.T) {
	s, c := agent(t)
	admin := dial(t, s.Admin, capgate.WithBearerToken(s.Tokens["bob"]))
	grants := capgatev1.NewApprovalAdminClient(admin.Conn())
	// One use, for refunds carrying this run's own reason: no other suite's call matches it.
	marker := fmt.Sprintf("go-grant-%d", time.Now().UnixNano())
	created, err := grants.CreateGrant(admin.Context(timeout(t, 10*time.Second)), &capgatev1.CreateGrantRequest{
		Actor: &capgatev1.Actor{Issuer: "test-idp", Id: "alice"}, CapabilityId: "orders.refund",
		Constraint: fmt.Sprintf("input.reason == %q && input.amount <= 900", marker),
		ExpiresIn:  durationpb.New(10 * time.Minute), MaxUses: 1, Note: "go client test"})
	if err != nil || created.GetError() != nil {
		t.Fatalf("CreateGrant: %v %v", err, created.GetError())
	}
	grant := created.GetGrant()

	// Over 500 a refund needs a manager's approval; the grant stands in for it.
	res := invoke(t, c, "orders.refund", map[string]any{"order_id": refundOrder, "amount": 800, "reason": marker})
	if _, ok := res.Outcome.(*capgate.Completed); !ok {
		t.Fatalf("want Completed under the grant, got %T %v", res.Outcome, res.Err())
	}
	if res.GrantID == "" || res.GrantID != grant.GetId() || res.ApprovalID != "" || res.Edited || res.Patch != nil {
		t.Fatalf("the envelope names the grant and no approval: %+v", res)
	}
	// Its only use is taken: the grant is exhausted.
	got, err := grants.GetGrant(admin.Context(timeout(t, 10*time.Second)), &capgatev1.GetGrantRequest{GrantId: grant.GetId()})
	if err != nil || got.GetGrant().GetUses() != 1 || got.GetGrant().GetStatus() != capgatev1.GrantStatus_GRANT_STATUS_EXHAUSTED {
		t.Fatalf("the grant after its one use: %v %v", got, err)
	}
	// A call the grant does not cover still waits for an approval.
	plain := invoke(t, c, "orders.refund", map[string]any{"order_id": refundOrder, "amount": 800, "reason": marker + "-other"})
	a := pendingApproval(t, plain)
	if plain.GrantID != "" || !a.Pending() {
		t.Fatalf("uncovered call: %+v %+v", plain, a)
	}
	decide(t, admin, &capgatev1.DecideApprovalRequest{ApprovalId: a.ID, Verdict: capgatev1.Verdict_VERDICT_REJECT,
		InputHash: a.InputHash}) // leave nothing pending
}

func TestResumedEditedCallShowsEditedAndThePatch(t *testing.T) {
	s, c := agent(t)
	admin := dial(t, s.Admin, capgate.WithBearerToken(s.Tokens["bob"]))
	res := invoke(t, c, "orders.refund_reviewed", map[string]any{"order_id": refundOrder, "amount": 900, "reason": "damaged"})
	a := pendingApproval(t, res)
	if a.Edited || a.Patch != nil || a.OriginalInputHash != "" {
		t.Fatalf("a new approval is not edited: %+v", a)
	}
	// bob lowers the amount in the input as he was shown it (the reason masked: sending the mask
	// back keeps the requester's reason); input_hash is still the one he was shown.
	decide(t, admin, &capgatev1.DecideApprovalRequest{ApprovalId: a.ID, Verdict: capgatev1.Verdict_VERDICT_APPROVE,
		InputHash: a.InputHash, EditedInputJson: []byte(`{"order_id":"` + refundOrder + `","amount":700,"reason":"****"}`)})

	seen, err := c.GetApproval(timeout(t, 10*time.Second), a.ID)
	if err != nil || !seen.Approved() || !seen.Edited || seen.OriginalInputHash != a.InputHash || seen.InputHash == a.InputHash {
		t.Fatalf("the requester sees the edit: %+v, %v", seen, err)
	}
	want := []capgate.PatchOp{{Op: "replace", Path: "/amount", Value: float64(700)}}
	if !reflect.DeepEqual(seen.Patch, want) {
		t.Fatalf("approval patch: %+v", seen.Patch)
	}
	done, err := c.Resume(timeout(t, 10*time.Second), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	out, ok := done.Outcome.(*capgate.Completed)
	if !ok || !done.Edited || !reflect.DeepEqual(done.Patch, want) || done.ApprovalID != a.ID {
		t.Fatalf("want the edited refund completed, got %T %v %+v", done.Outcome, done.Err(), done)
	}
	if out.Output["amount"] != float64(700) {
		t.Fatalf("the edited input ran: %v", out.Output)
	}
}

func TestQuorumApprovalShowsProgress(t *testing.T) {
	s, c := agent(t)
	bob := dial(t, s.Admin, capgate.WithBearerToken(s.Tokens["bob"]))
	carol := dial(t, s.Admin, capgate.WithBearerToken(s.Tokens["carol"]))
	a := pendingApproval(t, invoke(t, c, "orders.refund_dual", map[string]any{"order_id": refundOrder, "amount": 20}))
	if a.Quorum != 2 || a.ApprovalsReceived != 0 || a.Progress() != "0 of 2" {
		t.Fatalf("a new two-person approval: %+v", a)
	}
	// Escalation is planned at creation (30 minutes later, to admins) and has not happened.
	if !a.EscalateAt.Equal(a.CreatedAt.Add(30*time.Minute)) || !a.EscalatedAt.IsZero() ||
		!reflect.DeepEqual(a.EscalationRoles, []string{"admin"}) {
		t.Fatalf("escalation of a new approval: at %v, escalated %v, roles %v", a.EscalateAt, a.EscalatedAt, a.EscalationRoles)
	}
	approve := &capgatev1.DecideApprovalRequest{ApprovalId: a.ID, Verdict: capgatev1.Verdict_VERDICT_APPROVE, InputHash: a.InputHash}
	decide(t, bob, approve)
	half, err := c.GetApproval(timeout(t, 10*time.Second), a.ID)
	if err != nil || !half.Pending() || half.Progress() != "1 of 2" {
		t.Fatalf("after one approval: %+v, %v", half, err)
	}
	// Resuming now is refused and runs nothing: one approval is not enough.
	early, err := c.Resume(timeout(t, 10*time.Second), a.ID)
	if err != nil || early.Err() == nil || early.ExecutionState != capgatev1.ExecutionState_EXECUTION_STATE_NOT_STARTED {
		t.Fatalf("resume at 1 of 2: %+v, %v", early, err)
	}
	decide(t, carol, approve)
	full, err := c.WaitForApproval(timeout(t, 10*time.Second), a.ID)
	if err != nil || !full.Approved() || full.Progress() != "2 of 2" {
		t.Fatalf("after two approvals: %+v, %v", full, err)
	}
	done, err := c.Resume(timeout(t, 10*time.Second), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := done.Outcome.(*capgate.Completed); !ok {
		t.Fatalf("want the refund completed, got %T %v", done.Outcome, done.Err())
	}
}
