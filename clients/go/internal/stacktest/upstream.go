package stacktest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// CallRecord is what the example upstream saw for one call (orders.v1.CallRecord).
type CallRecord struct {
	Method, ExecutionID, Capability, ApprovalID, IdempotencyKey, CorrelationID string
	ActorTokenPresent, Cancelled                                               bool
}

// UpstreamCalls reads the example upstream's call log through its Control service. The Go module
// has no stubs for the example's proto, so the call goes through dynamicpb over the descriptor
// set the repository ships (examples/orders/orders.pb).
func (s *Stack) UpstreamCalls(t testing.TB) []CallRecord {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "examples", "orders", "orders.pb"))
	if err != nil {
		t.Fatal(err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(raw, &set); err != nil {
		t.Fatal(err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := files.FindDescriptorByName("orders.v1.Control.GetStats")
	if err != nil {
		t.Fatal(err)
	}
	method := desc.(protoreflect.MethodDescriptor)
	conn, err := grpc.NewClient(s.Orders, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := dynamicpb.NewMessage(method.Output())
	if err := conn.Invoke(ctx, "/orders.v1.Control/GetStats", dynamicpb.NewMessage(method.Input()), resp); err != nil {
		t.Fatal(err)
	}
	log := resp.Get(method.Output().Fields().ByName("log")).List()
	out := make([]CallRecord, 0, log.Len())
	for i := 0; i < log.Len(); i++ {
		m := log.Get(i).Message()
		str := func(name protoreflect.Name) string { return m.Get(m.Descriptor().Fields().ByName(name)).String() }
		flag := func(name protoreflect.Name) bool { return m.Get(m.Descriptor().Fields().ByName(name)).Bool() }
		out = append(out, CallRecord{
			Method: str("method"), ExecutionID: str("execution_id"), Capability: str("capability"),
			ApprovalID: str("approval_id"), IdempotencyKey: str("idempotency_key"),
			CorrelationID: str("correlation_id"), ActorTokenPresent: flag("actor_token_present"),
			Cancelled: flag("cancelled"),
		})
	}
	return out
}
