package dev.capgate.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorSet;
import com.google.protobuf.Descriptors;
import com.google.protobuf.DynamicMessage;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.protobuf.ProtoUtils;
import io.grpc.stub.ClientCalls;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The shared test stack that {@code scripts/stack.py start} runs (one gateway, the example
 * upstream, Redis): {@code .run/stack.json} at the repository root, or the file named by
 * $CAPGATE_STACK. Tests that need it are skipped, saying why, when it is absent.
 */
record TestStack(String agents, String admin, String localSocket, String orders, Map<String, String> tokens,
    String jwksFile) {

  static Path repoRoot() {
    Path dir = Path.of("").toAbsolutePath();
    while (dir != null && !Files.isDirectory(dir.resolve("proto/capgate/v1"))) {
      dir = dir.getParent();
    }
    if (dir == null) {
      throw new IllegalStateException("run the tests inside the capgate repository");
    }
    return dir;
  }

  static Path path() {
    String env = System.getenv("CAPGATE_STACK");
    if (env != null && !env.isEmpty()) {
      Path p = Path.of(env);
      return Files.isDirectory(p) ? p.resolve("stack.json") : p;
    }
    return repoRoot().resolve(".run/stack.json");
  }

  /** Why the stack tests skip when there is no stack. */
  static String missing() {
    return "no shared test stack at " + path() + ": run `python scripts/stack.py start` (or set CAPGATE_STACK)";
  }

  /** The running stack, or null when there is none. */
  static TestStack loadOrNull() throws Exception {
    Path p = path();
    if (!Files.isRegularFile(p)) {
      return null;
    }
    JsonNode s = new ObjectMapper().readTree(Files.readString(p));
    Map<String, String> tokens = new HashMap<>();
    s.get("tokens").fields().forEachRemaining(e -> tokens.put(e.getKey(), e.getValue().asText()));
    return new TestStack(s.get("agents").asText(), s.get("admin").asText(), s.get("local_socket").asText(),
        s.get("orders").asText(), Map.copyOf(tokens), s.path("jwks_file").asText());
  }

  CapgateClient alice() {
    return CapgateClient.builder(agents).bearerToken(tokens.get("alice")).build();
  }

  /** One call the example upstream saw (orders.v1.CallRecord). */
  record CallRecord(String method, String executionId, String approvalId, String idempotencyKey,
      boolean actorTokenPresent, boolean cancelled) {}

  /**
   * The example upstream's call log, read from its Control service. The client has no stubs for
   * the example's proto, so this uses DynamicMessage over examples/orders/orders.pb.
   */
  List<CallRecord> upstreamCalls() throws Exception {
    var set = FileDescriptorSet.parseFrom(Files.readAllBytes(repoRoot().resolve("examples/orders/orders.pb")));
    Map<String, Descriptors.FileDescriptor> built = new HashMap<>();
    Descriptors.FileDescriptor file = null;
    for (FileDescriptorProto fp : set.getFileList()) { // dependencies come first in the set
      var deps = fp.getDependencyList().stream().map(built::get).toArray(Descriptors.FileDescriptor[]::new);
      file = Descriptors.FileDescriptor.buildFrom(fp, deps);
      built.put(fp.getName(), file);
    }
    var method = file.findServiceByName("Control").findMethodByName("GetStats");
    MethodDescriptor<DynamicMessage, DynamicMessage> md = MethodDescriptor.<DynamicMessage, DynamicMessage>newBuilder()
        .setType(MethodDescriptor.MethodType.UNARY)
        .setFullMethodName("orders.v1.Control/GetStats")
        .setRequestMarshaller(ProtoUtils.marshaller(DynamicMessage.getDefaultInstance(method.getInputType())))
        .setResponseMarshaller(ProtoUtils.marshaller(DynamicMessage.getDefaultInstance(method.getOutputType())))
        .build();
    ManagedChannel ch = Grpc.newChannelBuilder(orders, InsecureChannelCredentials.create()).build();
    try {
      DynamicMessage stats = ClientCalls.blockingUnaryCall(ch, md,
          io.grpc.CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS),
          DynamicMessage.getDefaultInstance(method.getInputType()));
      var logField = method.getOutputType().findFieldByName("log");
      List<CallRecord> out = new ArrayList<>();
      for (int i = 0; i < stats.getRepeatedFieldCount(logField); i++) {
        var rec = (DynamicMessage) stats.getRepeatedField(logField, i);
        var t = rec.getDescriptorForType();
        out.add(new CallRecord(
            (String) rec.getField(t.findFieldByName("method")),
            (String) rec.getField(t.findFieldByName("execution_id")),
            (String) rec.getField(t.findFieldByName("approval_id")),
            (String) rec.getField(t.findFieldByName("idempotency_key")),
            (Boolean) rec.getField(t.findFieldByName("actor_token_present")),
            (Boolean) rec.getField(t.findFieldByName("cancelled"))));
      }
      return out;
    } finally {
      ch.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
  }
}
