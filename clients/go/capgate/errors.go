package capgate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/capgate/capgate/clients/go/capgatev1"
)

// Issue is one input-validation problem: a JSON path ("$.amount") and a message.
type Issue struct {
	Path    string
	Message string
}

// Error is a capgate failure with its stable ErrorCode: a governed failure from the envelope
// (Failed, Cancelled) or a transport fault mapped to the closest code. Use errors.As.
type Error struct {
	Code                  capgatev1.ErrorCode
	Stage                 string // discovery, input-validation, policy, approval, execution, ...
	Message               string // public message
	Retryable             bool
	ExposeToModel         bool
	Issues                []Issue
	ExecutedBeforeFailure bool
	ExecutionState        capgatev1.ExecutionState
	// RetryAfter is set for ERROR_CODE_RATE_LIMITED: the earliest time from now at which the
	// same call can pass the limit that refused it (0 otherwise).
	RetryAfter time.Duration
	// GRPCCode is the transport status for faults that never reached the pipeline
	// (codes.OK for governed failures).
	GRPCCode codes.Code
	cause    error
}

// CodeName is the code without its ERROR_CODE_ prefix, as JSON, MCP and audit events spell it.
func CodeName(code capgatev1.ErrorCode) string {
	return strings.TrimPrefix(code.String(), "ERROR_CODE_")
}

func (e *Error) Error() string {
	msg := "capgate: " + CodeName(e.Code)
	if e.Stage != "" {
		msg += " (" + e.Stage + ")"
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	for _, is := range e.Issues {
		msg += fmt.Sprintf("; %s %s", is.Path, is.Message)
	}
	return msg
}

// Unwrap gives the transport cause, so errors.Is(err, context.Canceled) holds after a
// cancellation and errors.Is(err, context.DeadlineExceeded) after a local deadline.
func (e *Error) Unwrap() error { return e.cause }

// fromProto converts the envelope's CapabilityError.
func fromProto(pe *capgatev1.CapabilityError) *Error {
	if pe == nil {
		return &Error{Code: capgatev1.ErrorCode_ERROR_CODE_UNSPECIFIED, Message: "empty error in envelope"}
	}
	e := &Error{
		Code: pe.GetCode(), Stage: pe.GetStage(), Message: pe.GetMessage(),
		Retryable: pe.GetRetryable(), ExposeToModel: pe.GetExposeToModel(),
		ExecutedBeforeFailure: pe.GetExecutedBeforeFailure(), ExecutionState: pe.GetExecutionState(),
	}
	if ra := pe.GetRetryAfter(); ra != nil {
		e.RetryAfter = ra.AsDuration()
	}
	for _, is := range pe.GetIssues() {
		e.Issues = append(e.Issues, Issue{Path: is.GetPath(), Message: is.GetMessage()})
	}
	return e
}

// transportError maps a gRPC status (never a governed failure: those come inside the envelope)
// to an *Error, keeping the context error as the cause.
func transportError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	e := &Error{Message: st.Message(), GRPCCode: st.Code(), cause: err,
		ExecutionState: capgatev1.ExecutionState_EXECUTION_STATE_UNKNOWN}
	switch st.Code() {
	case codes.Unauthenticated:
		e.Code, e.Stage = capgatev1.ErrorCode_ERROR_CODE_UNAUTHENTICATED, "authentication"
		e.ExecutionState = capgatev1.ExecutionState_EXECUTION_STATE_NOT_STARTED
	case codes.Canceled:
		e.Code, e.Stage = capgatev1.ErrorCode_ERROR_CODE_CANCELLED, "cancellation"
	case codes.DeadlineExceeded:
		e.Code, e.Stage, e.Retryable = capgatev1.ErrorCode_ERROR_CODE_TIMEOUT, "timeout", true
	default:
		e.Code = capgatev1.ErrorCode_ERROR_CODE_UNSPECIFIED
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		e.cause = errors.Join(ctxErr, err)
	}
	return e
}
