package capgate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/capgate/capgate/clients/go/capgatev1"
)

// Approval is an approval request as its requester sees it.
type Approval struct {
	ID           string
	CapabilityID string
	Status       capgatev1.ApprovalStatus
	Reasons      []string
	Message      string
	// InputHash is the hex SHA-256 of the canonical input; approvers decide against it.
	InputHash    string
	CreatedAt    time.Time
	ExpiresAt    time.Time
	DecidedAt    time.Time // zero while pending
	DecisionNote string
	Risk         string
	SideEffect   string
	// Edited is set once an approver changed the input: InputHash is then the edited input's
	// hash, OriginalInputHash the requester's, and Patch the change (after the capability's
	// redact.approval_input rules).
	Edited            bool
	OriginalInputHash string
	Patch             []PatchOp
	// Quorum is how many distinct approvers must approve (1 unless a requirement says more) and
	// ApprovalsReceived how many did so far for the current input; Progress says "1 of 2".
	// DistinctRoles must each be held by a different approver.
	Quorum            int
	ApprovalsReceived int
	DistinctRoles     []string
	// EscalatedAt is set (non-zero) once the approval stayed pending past its requirement's
	// escalate_after, planned for EscalateAt; holders of EscalationRoles may then decide too.
	EscalatedAt     time.Time
	EscalateAt      time.Time
	EscalationRoles []string
	// Proto is the full message (requester, decided_by, approver constraint, ...).
	Proto *capgatev1.Approval
}

// Pending reports whether no decision has been made yet.
func (a *Approval) Pending() bool {
	return a.Status == capgatev1.ApprovalStatus_APPROVAL_STATUS_PENDING
}

// Approved reports whether the approval may be resumed (or already was); false on a nil
// *Approval, so the result of a failed WaitForApproval can be tested directly.
func (a *Approval) Approved() bool {
	if a == nil {
		return false
	}
	switch a.Status {
	case capgatev1.ApprovalStatus_APPROVAL_STATUS_APPROVED, capgatev1.ApprovalStatus_APPROVAL_STATUS_CONSUMED,
		capgatev1.ApprovalStatus_APPROVAL_STATUS_EXECUTED:
		return true
	}
	return false
}

// Progress is the quorum progress as approvers read it: "1 of 2".
func (a *Approval) Progress() string {
	return fmt.Sprintf("%d of %d", a.ApprovalsReceived, a.Quorum)
}

func approvalFromProto(p *capgatev1.Approval) (*Approval, error) {
	if p == nil {
		return &Approval{Quorum: 1}, nil
	}
	patch, err := decodePatch(p.GetPatchJson())
	if err != nil {
		return nil, err
	}
	return &Approval{
		ID: p.GetId(), CapabilityID: p.GetCapabilityId(), Status: p.GetStatus(),
		Reasons: p.GetReasons(), Message: p.GetMessage(), InputHash: p.GetInputHash(),
		CreatedAt: asTime(p.GetCreatedAt()), ExpiresAt: asTime(p.GetExpiresAt()),
		DecidedAt: asTime(p.GetDecidedAt()), DecisionNote: p.GetDecisionNote(),
		Risk: p.GetRisk(), SideEffect: p.GetSideEffect(),
		Edited: p.GetEdited(), OriginalInputHash: p.GetOriginalInputHash(), Patch: patch,
		// A gateway from before quorums sends 0: one approver decides.
		Quorum: max(1, int(p.GetQuorum())), ApprovalsReceived: int(p.GetApprovalsReceived()),
		DistinctRoles: p.GetDistinctRoles(), EscalatedAt: asTime(p.GetEscalatedAt()),
		EscalateAt: asTime(p.GetEscalateAt()), EscalationRoles: p.GetEscalationRoles(),
		Proto: p,
	}, nil
}

func asTime(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

// GetApproval reads one of the caller's own approvals.
func (c *Client) GetApproval(ctx context.Context, approvalID string) (*Approval, error) {
	resp, err := c.stub.GetApproval(c.Context(ctx), &capgatev1.GetApprovalRequest{ApprovalId: approvalID})
	return approvalResponse(ctx, resp, err)
}

func approvalResponse(ctx context.Context, resp *capgatev1.GetApprovalResponse, err error) (*Approval, error) {
	if err != nil {
		return nil, transportError(ctx, err)
	}
	if resp.GetError() != nil {
		return nil, fromProto(resp.GetError())
	}
	return approvalFromProto(resp.GetApproval())
}

// maxWait is the gateway's cap on one WaitApproval long-poll.
const maxWait = 30 * time.Second

// WaitForApproval long-polls WaitApproval until the approval leaves PENDING or ctx ends. On ctx's
// deadline it returns the still-pending approval and an *Error with code APPROVAL_PENDING
// (wrapping context.DeadlineExceeded); a decided approval is returned with a nil error whatever
// the decision, so check Approved().
func (c *Client) WaitForApproval(ctx context.Context, approvalID string) (*Approval, error) {
	for {
		wait := maxWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if wait <= 0 {
			return c.stillPending(ctx, approvalID, context.DeadlineExceeded)
		}
		req := &capgatev1.WaitApprovalRequest{ApprovalId: approvalID, Timeout: durationpb.New(wait)}
		resp, err := c.stub.WaitApproval(c.Context(ctx), req)
		a, err := approvalResponse(ctx, resp, err)
		if err != nil {
			if ctxErr := ctx.Err(); errors.Is(ctxErr, context.DeadlineExceeded) {
				return c.stillPending(ctx, approvalID, ctxErr)
			}
			return nil, err
		}
		if !a.Pending() {
			return a, nil
		}
		if ctx.Err() != nil {
			return a, pendingError(ctx.Err())
		}
	}
}

func (c *Client) stillPending(ctx context.Context, approvalID string, cause error) (*Approval, error) {
	// One last read without the expired deadline, so the caller gets the approval back.
	readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	a, err := c.GetApproval(readCtx, approvalID)
	if err != nil {
		return nil, err
	}
	if !a.Pending() {
		return a, nil
	}
	return a, pendingError(cause)
}

func pendingError(cause error) *Error {
	return &Error{
		Code: capgatev1.ErrorCode_ERROR_CODE_APPROVAL_PENDING, Stage: "approval",
		Message: "the approval is still pending", Retryable: true, cause: cause,
		ExecutionState: capgatev1.ExecutionState_EXECUTION_STATE_NOT_STARTED,
	}
}
