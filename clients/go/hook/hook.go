// Package hook serves capgate governance hooks (capgate.v1.Hook, docs/hooks.md) from plain
// functions.
//
// The gateway calls a hook around a governed call: PreInvoke with the validated input (add
// context attributes that policies read as hooks.<name>.<attr>, replace the input, deny or ask
// for an approval), PostInvoke with the validated output (replace it), PostFailure after a
// failure (observe). A hook adds to governance and never bypasses it: its allow cannot remove a
// policy's deny, hide or approval requirement, and whatever it returns is validated again.
//
//	srv := &hook.Server{Pre: map[string]hook.PreFunc{"standing": standing}}
//	g := grpc.NewServer()
//	capgatev1.RegisterHookServer(g, srv)
//
// Handlers are keyed by the hook's configured name (every request carries it), so one server
// can serve several hooks; the key "" serves any name without its own handler.
package hook

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	capgatev1 "github.com/capgate/capgate/clients/go/capgatev1"
)

// Decision is a pre-hook's opinion, merged with the policies': deny > (hide) > ask > allow.
type Decision int

const (
	Abstain Decision = iota // no opinion (as allow)
	Allow
	Ask  // require a human approval, merged with the policies' requirements
	Deny // ERROR_CODE_HOOK_DENIED with Message
)

var decisions = map[Decision]capgatev1.HookDecision{
	Abstain: capgatev1.HookDecision_HOOK_DECISION_UNSPECIFIED,
	Allow:   capgatev1.HookDecision_HOOK_DECISION_ALLOW,
	Ask:     capgatev1.HookDecision_HOOK_DECISION_ASK,
	Deny:    capgatev1.HookDecision_HOOK_DECISION_DENY,
}

// PreInvoke is what a pre-hook sees: the call and the validated input (JSON).
type PreInvoke struct {
	Call  *capgatev1.HookContext
	Input json.RawMessage
}

// PreResult is a pre-hook's answer. Context holds only attributes declared for the hook in the
// gateway config, of their declared types; a non-nil UpdatedInput replaces the input.
type PreResult struct {
	Decision     Decision
	Message      string
	Context      map[string]any
	UpdatedInput any
}

// PostInvoke is what a post-hook sees: the call and the validated output (JSON, unredacted).
type PostInvoke struct {
	Call   *capgatev1.HookContext
	Output json.RawMessage
}

// PostResult is a post-hook's answer: a non-nil UpdatedOutput replaces the output.
type PostResult struct {
	UpdatedOutput any
}

// PreFunc, PostFunc and FailureFunc are the handlers of the three RPCs.
type (
	PreFunc     func(context.Context, PreInvoke) (PreResult, error)
	PostFunc    func(context.Context, PostInvoke) (PostResult, error)
	FailureFunc func(context.Context, *capgatev1.PostFailureRequest) error
)

// Server implements capgatev1.HookServer with the handlers it holds, by hook name.
type Server struct {
	capgatev1.UnimplementedHookServer
	Pre     map[string]PreFunc
	Post    map[string]PostFunc
	Failure map[string]FailureFunc
}

func pick[F any](handlers map[string]F, name string) (F, error) {
	if h, ok := handlers[name]; ok {
		return h, nil
	}
	if h, ok := handlers[""]; ok {
		return h, nil
	}
	var none F
	return none, status.Errorf(codes.Unimplemented, "no handler for hook %q", name)
}

func encode(value any) (string, error) {
	data, err := json.Marshal(value)
	if err != nil {
		return "", fmt.Errorf("hook answer is not JSON: %w", err)
	}
	return string(data), nil
}

// PreInvoke implements capgatev1.HookServer.
func (s *Server) PreInvoke(ctx context.Context, req *capgatev1.PreInvokeRequest) (*capgatev1.PreInvokeResponse, error) {
	h, err := pick(s.Pre, req.GetContext().GetHook())
	if err != nil {
		return nil, err
	}
	res, err := h(ctx, PreInvoke{Call: req.GetContext(), Input: json.RawMessage(req.GetInputJson())})
	if err != nil {
		return nil, err
	}
	out := &capgatev1.PreInvokeResponse{Decision: decisions[res.Decision], Message: res.Message}
	if len(res.Context) > 0 {
		if out.ContextJson, err = encode(res.Context); err != nil {
			return nil, err
		}
	}
	if res.UpdatedInput != nil {
		text, err := encode(res.UpdatedInput)
		if err != nil {
			return nil, err
		}
		out.UpdatedInputJson = &text
	}
	return out, nil
}

// PostInvoke implements capgatev1.HookServer.
func (s *Server) PostInvoke(ctx context.Context, req *capgatev1.PostInvokeRequest) (*capgatev1.PostInvokeResponse, error) {
	h, err := pick(s.Post, req.GetContext().GetHook())
	if err != nil {
		return nil, err
	}
	res, err := h(ctx, PostInvoke{Call: req.GetContext(), Output: json.RawMessage(req.GetOutputJson())})
	if err != nil {
		return nil, err
	}
	out := &capgatev1.PostInvokeResponse{}
	if res.UpdatedOutput != nil {
		text, err := encode(res.UpdatedOutput)
		if err != nil {
			return nil, err
		}
		out.UpdatedOutputJson = &text
	}
	return out, nil
}

// PostFailure implements capgatev1.HookServer.
func (s *Server) PostFailure(ctx context.Context, req *capgatev1.PostFailureRequest) (*capgatev1.PostFailureResponse, error) {
	h, err := pick(s.Failure, req.GetContext().GetHook())
	if err != nil {
		return nil, err
	}
	if err := h(ctx, req); err != nil {
		return nil, err
	}
	return &capgatev1.PostFailureResponse{}, nil
}
