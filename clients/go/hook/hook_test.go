package hook

import (
	"context"
	"encoding/json"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	capgatev1 "github.com/capgate/capgate/clients/go/capgatev1"
)

// dial serves srv on an in-memory listener (a real gRPC server and client, no network).
func dial(t *testing.T, srv *Server) capgatev1.HookClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	g := grpc.NewServer()
	capgatev1.RegisterHookServer(g, srv)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return capgatev1.NewHookClient(conn)
}

func TestPreInvokeAnswersByHookName(t *testing.T) {
	client := dial(t, &Server{Pre: map[string]PreFunc{
		"standing": func(_ context.Context, call PreInvoke) (PreResult, error) {
			var in map[string]any
			if err := json.Unmarshal(call.Input, &in); err != nil {
				return PreResult{}, err
			}
			return PreResult{
				Decision:     Ask,
				Message:      "look",
				Context:      map[string]any{"in_arrears": in["order_id"] == "o-1003"},
				UpdatedInput: map[string]any{"order_id": in["order_id"], "amount": 7},
			}, nil
		},
	}})
	res, err := client.PreInvoke(context.Background(), &capgatev1.PreInvokeRequest{
		Context:   &capgatev1.HookContext{Hook: "standing"},
		InputJson: `{"order_id":"o-1003"}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetDecision() != capgatev1.HookDecision_HOOK_DECISION_ASK || res.GetMessage() != "look" {
		t.Fatalf("decision %v %q", res.GetDecision(), res.GetMessage())
	}
	if res.GetContextJson() != `{"in_arrears":true}` {
		t.Fatalf("context %s", res.GetContextJson())
	}
	if res.UpdatedInputJson == nil || *res.UpdatedInputJson != `{"amount":7,"order_id":"o-1003"}` {
		t.Fatalf("updated input %v", res.UpdatedInputJson)
	}
}

func TestAnUnchangedAnswerCarriesNoUpdatesAndUnknownHooksAreUnimplemented(t *testing.T) {
	client := dial(t, &Server{
		Pre: map[string]PreFunc{"standing": func(context.Context, PreInvoke) (PreResult, error) {
			return PreResult{}, nil
		}},
		Post: map[string]PostFunc{"": func(context.Context, PostInvoke) (PostResult, error) {
			return PostResult{}, nil // "" serves any hook without its own handler
		}},
	})
	pre, err := client.PreInvoke(context.Background(), &capgatev1.PreInvokeRequest{
		Context: &capgatev1.HookContext{Hook: "standing"}, InputJson: `{}`,
	})
	if err != nil || pre.UpdatedInputJson != nil || pre.GetContextJson() != "" ||
		pre.GetDecision() != capgatev1.HookDecision_HOOK_DECISION_UNSPECIFIED {
		t.Fatalf("pre %v %v", pre, err)
	}
	post, err := client.PostInvoke(context.Background(), &capgatev1.PostInvokeRequest{
		Context: &capgatev1.HookContext{Hook: "dlp"}, OutputJson: `{}`,
	})
	if err != nil || post.UpdatedOutputJson != nil {
		t.Fatalf("post %v %v", post, err)
	}
	_, err = client.PreInvoke(context.Background(), &capgatev1.PreInvokeRequest{
		Context: &capgatev1.HookContext{Hook: "other"}, InputJson: `{}`,
	})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("unknown hook: %v", err)
	}
	_, err = client.PostFailure(context.Background(), &capgatev1.PostFailureRequest{
		Context: &capgatev1.HookContext{Hook: "dlp"},
	})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("no failure handler: %v", err)
	}
}
