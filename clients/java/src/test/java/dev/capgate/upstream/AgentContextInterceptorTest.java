package dev.capgate.upstream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.capgate.v1.ProcedureGrpc;
import dev.capgate.v1.ProcedureInvokeRequest;
import dev.capgate.v1.ProcedureInvokeResponse;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.InsecureServerCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.MetadataUtils;
import io.grpc.stub.StreamObserver;
import java.nio.charset.StandardCharsets;
import java.security.KeyFactory;
import java.security.PrivateKey;
import java.security.Signature;
import java.security.spec.PKCS8EncodedKeySpec;
import java.time.Instant;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The interceptor on a real gRPC server, with tokens signed by the vectors' test key. */
class AgentContextInterceptorTest {
  static final ObjectMapper JSON = new ObjectMapper();
  static String kid;
  static PrivateKey key;
  static Server server;
  static ManagedChannel channel;

  /** Echoes the AgentContext the handler sees (or null). */
  static final class Echo extends ProcedureGrpc.ProcedureImplBase {
    @Override
    public void invoke(ProcedureInvokeRequest req, StreamObserver<ProcedureInvokeResponse> out) {
      AgentContext ac = AgentContext.current();
      String json = "null";
      if (ac != null) {
        json = JSON.createObjectNode()
            .put("actor", ac.actor().id()).put("issuer", ac.actor().issuer())
            .put("support", ac.actor().hasRole("support")).put("exec", ac.executionId())
            .put("key", ac.idempotencyKey()).put("approval", ac.approvalId())
            .put("approver", ac.approver()).put("corr", ac.correlationId()).toString();
      }
      out.onNext(ProcedureInvokeResponse.newBuilder().setOutputJson(json).build());
      out.onCompleted();
    }
  }

  @BeforeAll
  static void start() throws Exception {
    JsonNode v = ActorTokenVectorsTest.vectors();
    for (JsonNode k : v.at("/jwks/keys")) {
      if (k.get("alg").asText().equals("EdDSA")) {
        kid = k.get("kid").asText();
      }
    }
    String pem = v.at("/private_keys_pem/" + kid).asText()
        .replaceAll("-----[A-Z ]+-----", "").replaceAll("\\s", "");
    key = KeyFactory.getInstance("Ed25519").generatePrivate(new PKCS8EncodedKeySpec(Base64.getDecoder().decode(pem)));
    var verifier = new ActorTokenVerifier(JSON.writeValueAsString(v.get("jwks")), "capgate", "orders");
    server = Grpc.newServerBuilderForPort(0, InsecureServerCredentials.create())
        .addService(ServerInterceptors.intercept(new Echo(), new AgentContextInterceptor(verifier)))
        .build().start();
    channel = Grpc.newChannelBuilder("127.0.0.1:" + server.getPort(), InsecureChannelCredentials.create()).build();
  }

  @AfterAll
  static void stop() throws Exception {
    channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
  }

  static ObjectNode claims(long now) {
    ObjectNode c = JSON.createObjectNode()
        .put("iss", "capgate").put("aud", "orders").put("sub", "alice").put("actor_iss", "test-idp")
        .put("kind", "user").put("exec_id", "exe_1").put("cap", "orders.refund").put("surface", "agent")
        .put("approval_id", "apr_1").put("approver", "bob").put("jti", "j1")
        .put("iat", now).put("exp", now + 60);
    c.putArray("roles").add("support");
    return c;
  }

  static String sign(ObjectNode claims) throws Exception {
    var enc = Base64.getUrlEncoder().withoutPadding();
    String header = JSON.createObjectNode().put("alg", "EdDSA").put("kid", kid).put("typ", "capgate-actor+jwt").toString();
    String input = enc.encodeToString(header.getBytes(StandardCharsets.UTF_8)) + "."
        + enc.encodeToString(claims.toString().getBytes(StandardCharsets.UTF_8));
    Signature s = Signature.getInstance("Ed25519");
    s.initSign(key);
    s.update(input.getBytes(StandardCharsets.US_ASCII));
    return input + "." + enc.encodeToString(s.sign());
  }

  static JsonNode call(Map<String, String> md) throws Exception {
    Metadata headers = new Metadata();
    md.forEach((k, v) -> headers.put(Metadata.Key.of(k, Metadata.ASCII_STRING_MARSHALLER), v));
    var stub = ProcedureGrpc.newBlockingStub(channel)
        .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(headers))
        .withDeadlineAfter(5, TimeUnit.SECONDS);
    return JSON.readTree(stub.invoke(ProcedureInvokeRequest.getDefaultInstance()).getOutputJson());
  }

  static long now() {
    return Instant.now().getEpochSecond();
  }

  @Test
  void handlerSeesTheVerifiedAgentContext() throws Exception {
    JsonNode ac = call(Map.of(
        "x-capgate-actor-token", sign(claims(now())), "x-capgate-execution-id", "exe_1",
        "x-capgate-capability", "orders.refund", "x-capgate-surface", "agent",
        "x-capgate-approval-id", "apr_1", "x-capgate-idempotency-key", "refund-42",
        "x-capgate-correlation-id", "corr-7"));
    assertEquals("alice", ac.get("actor").asText());
    assertEquals("test-idp", ac.get("issuer").asText());
    assertTrue(ac.get("support").asBoolean());
    assertEquals("exe_1", ac.get("exec").asText());
    assertEquals("refund-42", ac.get("key").asText());
    assertEquals("apr_1", ac.get("approval").asText());
    assertEquals("bob", ac.get("approver").asText());
    assertEquals("corr-7", ac.get("corr").asText());
  }

  @Test
  void idempotencyKeyDefaultsToTheExecutionId() throws Exception {
    JsonNode ac = call(Map.of("x-capgate-actor-token", sign(claims(now())), "x-capgate-execution-id", "exe_1"));
    assertEquals("exe_1", ac.get("key").asText());
  }

  /** The gateway reuses one token across executions (DESIGN §12, amended 2026-12-01). */
  @Test
  void aReusedTokenTakesTheExecutionFromTheMetadata() throws Exception {
    ObjectNode reused = claims(now());
    reused.remove(List.of("exec_id", "cap", "approval_id", "approver"));
    String token = sign(reused);
    for (String exec : List.of("exe_1", "exe_2")) {
      JsonNode ac = call(Map.of("x-capgate-actor-token", token, "x-capgate-execution-id", exec,
          "x-capgate-capability", "orders.refund"));
      assertEquals(exec, ac.get("exec").asText());
      assertEquals(exec, ac.get("key").asText());
    }
    for (Map<String, String> md : List.of(
        Map.of("x-capgate-actor-token", token, "x-capgate-capability", "orders.refund"),
        Map.of("x-capgate-actor-token", token, "x-capgate-execution-id", "exe_1"))) {
      StatusRuntimeException err = assertThrows(StatusRuntimeException.class, () -> call(md));
      assertEquals(Status.Code.UNAUTHENTICATED, err.getStatus().getCode());
      assertEquals("actor token invalid: missing_metadata", err.getStatus().getDescription());
    }
  }

  @Test
  void refusedCallsNeverReachTheHandler() throws Exception {
    ObjectNode expired = claims(now() - 120);
    ObjectNode otherAudience = claims(now());
    otherAudience.put("aud", "billing");
    Map<String, Map<String, String>> cases = Map.of(
        "missing", Map.of("x-capgate-execution-id", "exe_1"),
        "expired", Map.of("x-capgate-actor-token", sign(expired), "x-capgate-execution-id", "exe_1"),
        "wrong_audience", Map.of("x-capgate-actor-token", sign(otherAudience), "x-capgate-execution-id", "exe_1"),
        "malformed", Map.of("x-capgate-actor-token", "a.b", "x-capgate-execution-id", "exe_1"));
    for (var e : cases.entrySet()) {
      var err = assertThrows(StatusRuntimeException.class, () -> call(e.getValue()), e.getKey());
      assertEquals(Status.Code.UNAUTHENTICATED, err.getStatus().getCode(), e.getKey());
      assertTrue(err.getStatus().getDescription().endsWith(e.getKey()), err.getStatus().getDescription());
    }
    for (var md : List.of(
        Map.of("x-capgate-actor-token", sign(claims(now())), "x-capgate-execution-id", "exe_2"),
        Map.of("x-capgate-actor-token", sign(claims(now()))),
        Map.of("x-capgate-actor-token", sign(claims(now())), "x-capgate-execution-id", "exe_1",
            "x-capgate-approval-id", "apr_2"))) {
      var err = assertThrows(StatusRuntimeException.class, () -> call(md));
      assertEquals("actor token invalid: metadata_mismatch", err.getStatus().getDescription());
    }
  }

  @Test
  void outsideAnInterceptedCallThereIsNoContext() {
    assertNull(AgentContext.current());
  }
}
