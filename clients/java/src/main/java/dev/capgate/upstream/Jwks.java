package dev.capgate.upstream;

import com.fasterxml.jackson.databind.JsonNode;
import java.math.BigInteger;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.PublicKey;
import java.security.interfaces.ECPublicKey;
import java.security.spec.ECField;
import java.security.spec.ECFieldFp;
import java.security.spec.ECParameterSpec;
import java.security.spec.ECPoint;
import java.security.spec.X509EncodedKeySpec;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;

/** Parses the gateway's public JWKS into kid -> key with its pinned algorithm. */
final class Jwks {
  /** A verification key and the one algorithm it may verify (from the JWKS, never the token). */
  record Key(String alg, PublicKey publicKey) {}

  // DER SubjectPublicKeyInfo prefixes: Ed25519 (RFC 8410) and P-256 uncompressed points.
  private static final byte[] ED25519_SPKI = HexFormat.of().parseHex("302a300506032b6570032100");
  private static final byte[] P256_SPKI =
      HexFormat.of().parseHex("3059301306072a8648ce3d020106082a8648ce3d03010703420004");

  private Jwks() {}

  static Map<String, Key> parse(JsonNode jwks) {
    JsonNode keys = jwks == null ? null : jwks.get("keys");
    if (keys == null || !keys.isArray() || keys.isEmpty()) {
      throw new IllegalArgumentException("the JWKS has no keys");
    }
    Map<String, Key> out = new HashMap<>();
    for (JsonNode k : keys) {
      if (!k.isObject()) {
        throw new IllegalArgumentException("every JWKS key must be a JSON object");
      }
      String kid = text(k, "kid");
      String alg = text(k, "alg");
      if (kid.isEmpty() || !(alg.equals("EdDSA") || alg.equals("ES256"))) {
        throw new IllegalArgumentException("every JWKS key needs a kid and alg EdDSA or ES256");
      }
      if (k.has("d")) {
        throw new IllegalArgumentException("a JWKS for verification must hold public keys only");
      }
      if (out.containsKey(kid)) {
        throw new IllegalArgumentException("duplicate kid in the JWKS");
      }
      out.put(kid, new Key(alg, publicKey(k, alg)));
    }
    return Map.copyOf(out);
  }

  private static String text(JsonNode k, String name) {
    JsonNode v = k.get(name);
    return v != null && v.isTextual() ? v.asText() : "";
  }

  private static PublicKey publicKey(JsonNode k, String alg) {
    try {
      if (alg.equals("EdDSA") && text(k, "kty").equals("OKP") && text(k, "crv").equals("Ed25519")) {
        byte[] x = Base64Url.decode(text(k, "x"));
        if (x.length != 32) {
          throw new IllegalArgumentException("bad Ed25519 x");
        }
        return KeyFactory.getInstance("Ed25519").generatePublic(new X509EncodedKeySpec(concat(ED25519_SPKI, x)));
      }
      if (alg.equals("ES256") && text(k, "kty").equals("EC") && text(k, "crv").equals("P-256")) {
        byte[] x = Base64Url.decode(text(k, "x"));
        byte[] y = Base64Url.decode(text(k, "y"));
        if (x.length != 32 || y.length != 32) {
          throw new IllegalArgumentException("bad P-256 coordinates");
        }
        PublicKey key = KeyFactory.getInstance("EC").generatePublic(new X509EncodedKeySpec(concat(P256_SPKI, concat(x, y))));
        requireOnCurve((ECPublicKey) key);
        return key;
      }
    } catch (GeneralSecurityException | Base64Url.Malformed e) {
      throw new IllegalArgumentException("unreadable JWKS key", e);
    }
    throw new IllegalArgumentException("alg does not fit the key type (EdDSA: OKP Ed25519, ES256: EC P-256)");
  }

  /** y^2 = x^3 + ax + b (mod p): the JDK does not check this for verification keys. */
  private static void requireOnCurve(ECPublicKey key) {
    ECParameterSpec spec = key.getParams();
    ECField field = spec.getCurve().getField();
    BigInteger p = ((ECFieldFp) field).getP();
    ECPoint w = key.getW();
    BigInteger x = w.getAffineX();
    BigInteger y = w.getAffineY();
    BigInteger lhs = y.modPow(BigInteger.TWO, p);
    BigInteger rhs = x.pow(3).add(spec.getCurve().getA().multiply(x)).add(spec.getCurve().getB()).mod(p);
    if (!lhs.equals(rhs)) {
      throw new IllegalArgumentException("the P-256 point is not on the curve");
    }
  }

  private static byte[] concat(byte[] a, byte[] b) {
    byte[] out = new byte[a.length + b.length];
    System.arraycopy(a, 0, out, 0, a.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }
}
