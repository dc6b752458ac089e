package capgate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/capgate/capgate/clients/go/capgatev1"
)

// Result is the normalized envelope of one execution (ExecutionResult).
type Result struct {
	ExecutionID  string
	CapabilityID string
	Attempts     int
	Duration     time.Duration // zero on concealed answers
	// ExecutionState tells whether the upstream effect happened: NOT_STARTED, COMPLETED or
	// UNKNOWN (never re-run an UNKNOWN write automatically).
	ExecutionState capgatev1.ExecutionState
	ApprovalID     string // set on executions that resume an approval
	Revision       string
	// GrantID is set when a standing grant stood in for the approval this call needed: it ran
	// at once, without an approval of its own (docs/approvals.md, Grants).
	GrantID string
	// Edited is set on a Resume whose approver changed the input: the edited input ran, and
	// Patch is the change from the requester's input to it (after the capability's
	// redact.approval_input rules); nil unless Edited.
	Edited bool
	Patch  []PatchOp
	// Outcome is one of *Completed, *ApprovalRequired, *Failed, *Cancelled.
	Outcome Outcome
}

// Outcome is the closed set of envelope outcomes; switch on its concrete type.
type Outcome interface{ isOutcome() }

// Completed carries the validated, redacted output.
type Completed struct {
	Output map[string]any // decoded JSON (numbers as float64)
	JSON   []byte         // the output JSON text as the gateway sent it
}

// ApprovalRequired means the call is suspended until an approver decides; then Resume it.
type ApprovalRequired struct{ Approval *Approval }

// Failed is a governed failure (denied, invalid input, execution failed, ...).
type Failed struct{ Err *Error }

// Cancelled is a timeout or cancellation (Err.Code TIMEOUT or CANCELLED).
type Cancelled struct{ Err *Error }

func (*Completed) isOutcome()        {}
func (*ApprovalRequired) isOutcome() {}
func (*Failed) isOutcome()           {}
func (*Cancelled) isOutcome()        {}

// Decode unmarshals the output into v (a struct of your own, for exact types).
func (c *Completed) Decode(v any) error { return json.Unmarshal(c.JSON, v) }

// Err is the *Error of a Failed or Cancelled outcome, else nil.
func (r *Result) Err() *Error {
	switch o := r.Outcome.(type) {
	case *Failed:
		return o.Err
	case *Cancelled:
		return o.Err
	}
	return nil
}

func resultFromProto(pr *capgatev1.ExecutionResult) (*Result, error) {
	r := &Result{
		ExecutionID: pr.GetExecutionId(), CapabilityID: pr.GetCapabilityId(),
		Attempts: int(pr.GetAttempts()), ExecutionState: pr.GetExecutionState(),
		ApprovalID: pr.GetApprovalId(), Revision: pr.GetRevision(),
		GrantID: pr.GetGrantId(), Edited: pr.GetEdited(),
	}
	patch, err := decodePatch(pr.GetPatchJson())
	if err != nil {
		return nil, err
	}
	r.Patch = patch
	if pr.GetDuration() != nil {
		r.Duration = pr.GetDuration().AsDuration()
	}
	switch o := pr.GetOutcome().(type) {
	case *capgatev1.ExecutionResult_Completed:
		raw := []byte(o.Completed.GetOutputJson())
		out := map[string]any{}
		if len(bytes.TrimSpace(raw)) > 0 {
			if err := json.Unmarshal(raw, &out); err != nil {
				return nil, fmt.Errorf("capgate: the output is not a JSON object: %w", err)
			}
		}
		r.Outcome = &Completed{Output: out, JSON: raw}
	case *capgatev1.ExecutionResult_ApprovalRequired:
		a, err := approvalFromProto(o.ApprovalRequired.GetApproval())
		if err != nil {
			return nil, err
		}
		r.Outcome = &ApprovalRequired{Approval: a}
	case *capgatev1.ExecutionResult_Failed:
		r.Outcome = &Failed{Err: fromProto(o.Failed)}
	case *capgatev1.ExecutionResult_Cancelled:
		r.Outcome = &Cancelled{Err: fromProto(o.Cancelled)}
	default:
		return nil, fmt.Errorf("capgate: envelope %q has no outcome", pr.GetExecutionId())
	}
	return r, nil
}

// PatchOp is one RFC 6902 JSON Patch operation. The gateway writes add, remove and replace, with
// Path an RFC 6901 pointer ("/amount") and Value the new JSON value (numbers as float64).
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	From  string `json:"from,omitempty"`
	Value any    `json:"value,omitempty"`
}

// decodePatch reads a patch_json field: nil for an empty one.
func decodePatch(text string) ([]PatchOp, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	var ops []PatchOp
	if err := json.Unmarshal([]byte(text), &ops); err != nil {
		return nil, fmt.Errorf("capgate: the patch is not a JSON Patch: %w", err)
	}
	return ops, nil
}
