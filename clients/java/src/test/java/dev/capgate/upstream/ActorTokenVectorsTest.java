package dev.capgate.upstream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Consumer;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/** The golden vectors shared by every verifier. Never skipped: they need no stack. */
class ActorTokenVectorsTest {
  static final Path VECTORS = Path.of("..", "..", "tests", "vectors", "actor_token", "vectors.json");
  static final ObjectMapper JSON = new ObjectMapper();

  static JsonNode vectors() throws Exception {
    JsonNode v = JSON.readTree(Files.readString(VECTORS));
    assertEquals("capgate-actor-token-vectors/1", v.get("format").asText());
    return v;
  }

  @TestFactory
  List<DynamicTest> goldenVectors() throws Exception {
    JsonNode v = vectors();
    String jwks = JSON.writeValueAsString(v.get("jwks"));
    Duration leeway = Duration.ofMillis((long) (v.at("/verifier/leeway_s").asDouble() * 1000));
    Duration maxLifetime = Duration.ofMillis((long) (v.at("/verifier/max_lifetime_s").asDouble() * 1000));
    List<DynamicTest> tests = new ArrayList<>();
    Set<String> seen = new TreeSet<>();
    for (JsonNode c : v.get("cases")) {
      String expect = c.get("expect").asText();
      seen.add(expect.equals("valid") ? "valid" : c.get("reason").asText());
      tests.add(
          DynamicTest.dynamicTest(
              c.get("name").asText(),
              () -> {
                var verifier =
                    new ActorTokenVerifier(jwks, c.get("issuer").asText(), c.get("audience").asText(),
                        leeway, maxLifetime, Clock.systemUTC());
                double nowS = c.get("now").asDouble();
                Instant now = Instant.ofEpochSecond((long) nowS, (long) ((nowS % 1) * 1e9));
                if (expect.equals("valid")) {
                  ActorClaims claims = verifier.verify(c.get("token").asText(), now);
                  assertEquals(c.get("claims"), claims.raw(), "claims member for member");
                  assertEquals(c.at("/claims/sub").asText(), claims.subject());
                  // exec_id is optional (absent from reused tokens): null when absent.
                  assertEquals(
                      c.at("/claims/exec_id").isMissingNode() ? null : c.at("/claims/exec_id").asText(),
                      claims.executionId());
                } else {
                  var e = assertThrows(InvalidActorTokenException.class,
                      () -> verifier.verify(c.get("token").asText(), now));
                  assertEquals(c.get("reason").asText(), e.reason());
                }
              }));
    }
    // Every reason class of the check order is exercised, so the suite cannot pass vacuously.
    assertEquals(
        new TreeSet<>(List.of("valid", "malformed", "bad_alg", "wrong_type", "unknown_kid",
            "bad_signature", "invalid_claims", "wrong_issuer", "wrong_audience", "expired",
            "not_yet_valid", "lifetime_exceeded")),
        seen);
    return tests;
  }

  @Test
  void jwksKeysThatCannotBePinnedAreConfigErrors() throws Exception {
    JsonNode v = vectors();
    ObjectNode first = (ObjectNode) v.at("/jwks/keys/0");
    List<Consumer<ObjectNode>> mutations =
        List.of(
            k -> k.remove("alg"),
            k -> k.put("alg", "HS256"),
            k -> k.put("alg", "ES256"), // an Ed25519 key pinned to ES256
            k -> k.put("d", "AAAA"),
            k -> k.remove("kid"));
    for (Consumer<ObjectNode> m : mutations) {
      ObjectNode k = first.deepCopy();
      m.accept(k);
      String jwks = JSON.createObjectNode().set("keys", JSON.createArrayNode().add(k)).toString();
      assertThrows(IllegalArgumentException.class, () -> new ActorTokenVerifier(jwks, "capgate", "orders"));
    }
    assertThrows(IllegalArgumentException.class, () -> new ActorTokenVerifier("{\"keys\":[]}", "capgate", "orders"));
    String jwks = JSON.writeValueAsString(v.get("jwks"));
    assertThrows(IllegalArgumentException.class, () -> new ActorTokenVerifier(jwks, "", "orders"));
    if (v.get("cases").isEmpty()) {
      fail("no cases");
    }
  }
}
