package dev.capgate.upstream;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.Signature;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Verifies the actor token that capgate signs for every upstream call (metadata {@code
 * x-capgate-actor-token}): a compact JWS, EdDSA or ES256, against the gateway's published JWKS.
 * The checks, their order and reason classes are those of tests/vectors/actor_token/README.md.
 * Only {@code java.security} is used; the algorithm always comes from the JWKS key that the
 * token's kid selects, never from the token. Thread-safe.
 */
public final class ActorTokenVerifier {
  public static final String TOKEN_TYPE = "capgate-actor+jwt";
  public static final Duration DEFAULT_LEEWAY = Duration.ofSeconds(5);
  public static final Duration DEFAULT_MAX_LIFETIME = Duration.ofSeconds(60);

  // Duplicate member names are refused (parsers disagree on which one wins), as in Python.
  private static final ObjectMapper JSON =
      new ObjectMapper()
          .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
          .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);
  private static final String[] STRING_CLAIMS = {
    "iss", "sub", "actor_iss", "kind", "surface", "jti"
  };

  private final Map<String, Jwks.Key> keys;
  private final String issuer;
  private final String audience;
  private final double leeway;
  private final double maxLifetime;
  private final Clock clock;

  /**
   * @param jwksJson the JWKS the gateway publishes (actor_token.jwks_out)
   * @param issuer the gateway's actor_token.issuer, usually "capgate"
   * @param audience this upstream's name in the gateway config
   */
  public ActorTokenVerifier(String jwksJson, String issuer, String audience) {
    this(jwksJson, issuer, audience, DEFAULT_LEEWAY, DEFAULT_MAX_LIFETIME, Clock.systemUTC());
  }

  public ActorTokenVerifier(
      String jwksJson, String issuer, String audience, Duration leeway, Duration maxLifetime, Clock clock) {
    if (issuer == null || issuer.isEmpty() || audience == null || audience.isEmpty()) {
      throw new IllegalArgumentException("a verifier needs the gateway issuer and its audience");
    }
    try {
      this.keys = Jwks.parse(JSON.readTree(jwksJson));
    } catch (IOException e) {
      throw new IllegalArgumentException("the JWKS is not JSON", e);
    }
    this.issuer = issuer;
    this.audience = audience;
    this.leeway = leeway.toNanos() / 1e9;
    this.maxLifetime = maxLifetime.toNanos() / 1e9;
    this.clock = clock;
  }

  /** A verifier over the JWKS file the gateway writes. */
  public static ActorTokenVerifier fromFile(Path jwks, String issuer, String audience) throws IOException {
    return new ActorTokenVerifier(Files.readString(jwks), issuer, audience);
  }

  /** Verifies at the verifier's clock. */
  public ActorClaims verify(String token) throws InvalidActorTokenException {
    return verify(token, clock.instant());
  }

  /** The claims, or the reason class of the first failed check. */
  public ActorClaims verify(String token, Instant now) throws InvalidActorTokenException {
    String[] parts = token.split("\\.", -1);
    if (parts.length != 3) {
      throw invalid("malformed");
    }
    ObjectNode header = object(parts[0]);
    ObjectNode payload = object(parts[1]);
    byte[] sig;
    try {
      sig = Base64Url.decode(parts[2]);
    } catch (Base64Url.Malformed e) {
      throw invalid("malformed");
    }
    if (header.has("crit")) {
      throw invalid("malformed"); // no extension is understood
    }
    String alg = textOrNull(header, "alg");
    if (!"EdDSA".equals(alg) && !"ES256".equals(alg)) {
      throw invalid("bad_alg");
    }
    if (!TOKEN_TYPE.equals(textOrNull(header, "typ"))) {
      throw invalid("wrong_type");
    }
    String kid = textOrNull(header, "kid");
    Jwks.Key key = kid == null ? null : keys.get(kid); // a dictionary key only, never a path
    if (key == null) {
      throw invalid("unknown_kid");
    }
    if (!alg.equals(key.alg())) {
      throw invalid("bad_alg"); // the algorithm comes from the key, never from the token
    }
    byte[] signingInput = (parts[0] + "." + parts[1]).getBytes(StandardCharsets.US_ASCII);
    if (!verifySignature(key, signingInput, sig)) {
      throw invalid("bad_signature");
    }
    ActorClaims claims = typedClaims(payload);
    if (!claims.issuer().equals(issuer)) {
      throw invalid("wrong_issuer");
    }
    if (!payload.get("aud").isTextual() || !claims.audience().equals(audience)) {
      throw invalid("wrong_audience"); // an array never matches, even one naming us
    }
    double t = now.getEpochSecond() + now.getNano() / 1e9;
    if (t >= claims.expiresAt() + leeway) {
      throw invalid("expired");
    }
    JsonNode nbf = payload.get("nbf");
    if (claims.issuedAt() > t + leeway || (nbf != null && nbf.asDouble() > t + leeway)) {
      throw invalid("not_yet_valid");
    }
    if (claims.expiresAt() - claims.issuedAt() > maxLifetime) {
      throw invalid("lifetime_exceeded");
    }
    return claims;
  }

  private static ObjectNode object(String segment) throws InvalidActorTokenException {
    try {
      JsonNode node = JSON.readTree(Base64Url.decode(segment));
      if (node instanceof ObjectNode obj) {
        return obj;
      }
    } catch (IOException | Base64Url.Malformed e) {
      // fall through: not base64url, not JSON, trailing data or a duplicate member
    }
    throw invalid("malformed");
  }

  private static boolean verifySignature(Jwks.Key key, byte[] input, byte[] sig) {
    try {
      Signature verifier;
      if (key.alg().equals("ES256")) {
        // JWS ECDSA is raw R || S, 64 bytes (RFC 7518 §3.4): the P1363 format; DER is refused.
        if (sig.length != 64) {
          return false;
        }
        verifier = Signature.getInstance("SHA256withECDSAinP1363Format");
      } else {
        verifier = Signature.getInstance("Ed25519");
      }
      verifier.initVerify(key.publicKey());
      verifier.update(input);
      return verifier.verify(sig);
    } catch (GeneralSecurityException e) {
      return false; // a signature the provider cannot even parse does not verify
    }
  }

  /** Check 7: presence and JSON types of the claims, and exp > iat. */
  private static ActorClaims typedClaims(ObjectNode p) throws InvalidActorTokenException {
    for (String name : STRING_CLAIMS) {
      if (!isText(p, name)) {
        throw invalid("invalid_claims");
      }
    }
    // exec_id and cap are optional: the gateway reuses a token across executions (DESIGN §12,
    // amended 2026-12-01) and sends them as metadata beside it; older tokens carry them.
    for (String name : new String[] {"exec_id", "cap", "approval_id", "approver"}) {
      if (p.has(name) && !p.get(name).isTextual()) {
        throw invalid("invalid_claims");
      }
    }
    JsonNode roles = p.get("roles");
    if (!p.has("aud") || roles == null || !roles.isArray()) {
      throw invalid("invalid_claims");
    }
    List<String> roleList = new ArrayList<>();
    for (JsonNode r : roles) {
      if (!r.isTextual()) {
        throw invalid("invalid_claims");
      }
      roleList.add(r.asText());
    }
    if (!isNumber(p.get("iat")) || !isNumber(p.get("exp")) || (p.has("nbf") && !isNumber(p.get("nbf")))) {
      throw invalid("invalid_claims");
    }
    double iat = p.get("iat").asDouble();
    double exp = p.get("exp").asDouble();
    if (exp <= iat) {
      throw invalid("invalid_claims");
    }
    return new ActorClaims(
        p.get("iss").asText(),
        p.get("aud").isTextual() ? p.get("aud").asText() : "",
        p.get("sub").asText(),
        p.get("actor_iss").asText(),
        p.get("kind").asText(),
        roleList,
        textOrNull(p, "exec_id"),
        textOrNull(p, "cap"),
        p.get("surface").asText(),
        textOrNull(p, "approval_id"),
        textOrNull(p, "approver"),
        p.get("jti").asText(),
        iat,
        exp,
        p);
  }

  private static boolean isText(ObjectNode o, String name) {
    JsonNode v = o.get(name);
    return v != null && v.isTextual();
  }

  private static boolean isNumber(JsonNode v) {
    return v != null && v.isNumber() && Double.isFinite(v.asDouble());
  }

  private static String textOrNull(ObjectNode o, String name) {
    JsonNode v = o.get(name);
    return v != null && v.isTextual() ? v.asText() : null;
  }

  private static InvalidActorTokenException invalid(String reason) {
    return new InvalidActorTokenException(reason);
  }
}
