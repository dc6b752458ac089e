package upstream_test

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/capgate/capgate/clients/go/actortoken"
	"github.com/capgate/capgate/clients/go/capgatev1"
	"github.com/capgate/capgate/clients/go/upstream"
)

// The test keys of the golden vectors (test keys only) sign fresh tokens for a real gRPC server.
type testKeys struct {
	jwks  []byte
	kid   string
	ed25k ed25519.PrivateKey
}

func loadKeys(t *testing.T) testKeys {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "tests", "vectors", "actor_token", "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vf struct {
		JWKS struct {
			Keys []map[string]any `json:"keys"`
		} `json:"jwks"`
		Private map[string]string `json:"private_keys_pem"`
	}
	if err := json.Unmarshal(data, &vf); err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(vf.JWKS)
	for _, k := range vf.JWKS.Keys {
		if k["alg"] == "EdDSA" {
			kid := k["kid"].(string)
			block, _ := pem.Decode([]byte(vf.Private[kid]))
			priv, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			return testKeys{jwks: jwks, kid: kid, ed25k: priv.(ed25519.PrivateKey)}
		}
	}
	t.Fatal("no EdDSA key in the vectors")
	return testKeys{}
}

func (k testKeys) sign(t *testing.T, claims map[string]any) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := enc(map[string]any{"alg": "EdDSA", "kid": k.kid, "typ": "capgate-actor+jwt"}) + "." + enc(claims)
	return input + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(k.ed25k, []byte(input)))
}

func claims(now time.Time) map[string]any {
	return map[string]any{
		"iss": "capgate", "aud": "orders", "sub": "alice", "actor_iss": "test-idp", "kind": "user",
		"roles": []string{"support"}, "exec_id": "exe_1", "cap": "orders.refund", "surface": "agent",
		"approval_id": "apr_1", "approver": "bob", "jti": "j1",
		"iat": now.Unix(), "exp": now.Unix() + 60,
	}
}

// procedure echoes the AgentContext it was handed, so the test sees what a handler sees.
type procedure struct {
	capgatev1.UnimplementedProcedureServer
}

func (procedure) Invoke(ctx context.Context, _ *capgatev1.ProcedureInvokeRequest) (*capgatev1.ProcedureInvokeResponse, error) {
	ac, ok := upstream.FromContext(ctx)
	if !ok {
		return &capgatev1.ProcedureInvokeResponse{OutputJson: "null"}, nil
	}
	out, _ := json.Marshal(ac)
	return &capgatev1.ProcedureInvokeResponse{OutputJson: string(out)}, nil
}

func serve(t *testing.T, v *actortoken.Verifier, opts ...upstream.Option) capgatev1.ProcedureClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(upstream.UnaryServerInterceptor(v, opts...)))
	capgatev1.RegisterProcedureServer(srv, procedure{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return capgatev1.NewProcedureClient(conn)
}

func call(t *testing.T, c capgatev1.ProcedureClient, kv ...string) (*upstream.AgentContext, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), kv...), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, &capgatev1.ProcedureInvokeRequest{CapabilityId: "orders.refund"})
	if err != nil {
		return nil, err
	}
	var ac *upstream.AgentContext
	if err := json.Unmarshal([]byte(resp.GetOutputJson()), &ac); err != nil {
		t.Fatal(err)
	}
	return ac, nil
}

func TestInterceptorHandsVerifiedAgentContextToHandler(t *testing.T) {
	k := loadKeys(t)
	v, err := actortoken.NewVerifier(k.jwks, "capgate", "orders")
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, v)
	ac, err := call(t, c, "x-capgate-actor-token", k.sign(t, claims(time.Now())),
		"x-capgate-execution-id", "exe_1", "x-capgate-capability", "orders.refund",
		"x-capgate-surface", "agent", "x-capgate-approval-id", "apr_1",
		"x-capgate-idempotency-key", "refund-42", "x-capgate-correlation-id", "corr-7")
	if err != nil {
		t.Fatal(err)
	}
	want := upstream.Actor{ID: "alice", Issuer: "test-idp", Kind: "user", Roles: []string{"support"}}
	if ac == nil || ac.Actor.ID != want.ID || ac.Actor.Issuer != want.Issuer || !ac.Actor.HasRole("support") {
		t.Fatalf("actor: got %+v", ac)
	}
	if ac.ExecutionID != "exe_1" || ac.IdempotencyKey != "refund-42" || ac.CorrelationID != "corr-7" ||
		ac.ApprovalID != "apr_1" || ac.Approver != "bob" || ac.Surface != "agent" {
		t.Fatalf("agent context: got %+v", ac)
	}
}

func TestIdempotencyKeyDefaultsToExecutionID(t *testing.T) {
	k := loadKeys(t)
	v, _ := actortoken.NewVerifier(k.jwks, "capgate", "orders")
	ac, err := call(t, serve(t, v), "x-capgate-actor-token", k.sign(t, claims(time.Now())),
		"x-capgate-execution-id", "exe_1")
	if err != nil || ac.IdempotencyKey != "exe_1" {
		t.Fatalf("got %+v, %v", ac, err)
	}
}

func TestInterceptorRefusesBeforeTheHandler(t *testing.T) {
	k := loadKeys(t)
	v, _ := actortoken.NewVerifier(k.jwks, "capgate", "orders")
	c := serve(t, v)
	now := time.Now()
	expired := claims(now.Add(-2 * time.Minute))
	otherAudience := claims(now)
	otherAudience["aud"] = "billing"
	cases := map[string]struct {
		md     []string
		reason string
	}{
		"no token":        {[]string{"x-capgate-execution-id", "exe_1"}, "missing"},
		"expired":         {[]string{"x-capgate-actor-token", k.sign(t, expired), "x-capgate-execution-id", "exe_1"}, "expired"},
		"other audience":  {[]string{"x-capgate-actor-token", k.sign(t, otherAudience), "x-capgate-execution-id", "exe_1"}, "wrong_audience"},
		"garbage":         {[]string{"x-capgate-actor-token", "a.b", "x-capgate-execution-id", "exe_1"}, "malformed"},
		"other execution": {[]string{"x-capgate-actor-token", k.sign(t, claims(now)), "x-capgate-execution-id", "exe_2"}, "does not match"},
		"no execution id": {[]string{"x-capgate-actor-token", k.sign(t, claims(now))}, "does not match"},
		"other approval":  {[]string{"x-capgate-actor-token", k.sign(t, claims(now)), "x-capgate-execution-id", "exe_1", "x-capgate-approval-id", "apr_2"}, "does not match"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ac, err := call(t, c, tc.md...)
			if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), tc.reason) {
				t.Fatalf("want Unauthenticated (%s), got %v / %+v", tc.reason, err, ac)
			}
		})
	}
}

// The gateway reuses one token across executions (DESIGN §12, amended 2026-12-01): it names no
// execution, and each call's execution id and capability come from the metadata beside it.
func TestReusedTokenTakesTheExecutionFromTheMetadata(t *testing.T) {
	k := loadKeys(t)
	v, _ := actortoken.NewVerifier(k.jwks, "capgate", "orders")
	c := serve(t, v)
	reused := claims(time.Now())
	delete(reused, "exec_id")
	delete(reused, "cap")
	delete(reused, "approval_id")
	delete(reused, "approver")
	token := k.sign(t, reused)
	for _, exec := range []string{"exe_1", "exe_2"} {
		ac, err := call(t, c, "x-capgate-actor-token", token, "x-capgate-execution-id", exec,
			"x-capgate-capability", "orders.refund")
		if err != nil || ac.ExecutionID != exec || ac.Capability != "orders.refund" || ac.IdempotencyKey != exec {
			t.Fatalf("%s: got %+v, %v", exec, ac, err)
		}
	}
	for name, md := range map[string][]string{
		"no execution id": {"x-capgate-actor-token", token, "x-capgate-capability", "orders.refund"},
		"no capability":   {"x-capgate-actor-token", token, "x-capgate-execution-id", "exe_1"},
	} {
		_, err := call(t, c, md...)
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), "without execution id") {
			t.Fatalf("%s: want Unauthenticated (missing metadata), got %v", name, err)
		}
	}
}

func TestSkippedMethodsPassWithoutContext(t *testing.T) {
	k := loadKeys(t)
	v, _ := actortoken.NewVerifier(k.jwks, "capgate", "orders")
	ac, err := call(t, serve(t, v, upstream.SkipMethods("/capgate.v1.Procedure/")))
	if err != nil || ac != nil {
		t.Fatalf("a skipped method runs without an AgentContext: %+v, %v", ac, err)
	}
}
