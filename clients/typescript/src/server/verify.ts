/**
 * Verifier of the gateway-signed actor token (`x-capgate-actor-token`) with Node's `crypto` only.
 *
 * The checks run in the order of tests/vectors/actor_token/README.md and each failure has one
 * reason class; the golden vectors pin both:
 *  1 malformed · 2 bad_alg · 3 wrong_type · 4 unknown_kid · 5 bad_alg (header alg ≠ the key's) ·
 *  6 bad_signature · 7 invalid_claims · 8 wrong_issuer · 9 wrong_audience · 10 expired ·
 *  11 not_yet_valid · 12 lifetime_exceeded.
 * The algorithm always comes from the JWKS key that `kid` selects, never from the token (RFC 8725).
 */
import { createPublicKey, verify as cryptoVerify, type KeyObject, type JsonWebKey } from "node:crypto";
import { readFileSync } from "node:fs";

export const TOKEN_TYPE = "capgate-actor+jwt";
export const MAX_LIFETIME_S = 60;
const ALLOWED_ALGS = new Set(["EdDSA", "ES256"]);
const ES256_SIGNATURE_BYTES = 64; // raw R || S (RFC 7518 §3.4), never DER
const B64URL = /^[A-Za-z0-9_-]*$/;
const STRING_CLAIMS = ["iss", "sub", "actor_iss", "kind", "surface", "jti"] as const;
// exec_id and cap are optional: the gateway reuses a token across executions (DESIGN §12, amended
// 2026-12-01) and sends them as metadata beside it; tokens signed before that carry them.
const OPTIONAL_STRING_CLAIMS = ["exec_id", "cap", "approval_id", "approver"] as const;

export type ActorTokenReason =
  | "malformed"
  | "bad_alg"
  | "wrong_type"
  | "unknown_kid"
  | "bad_signature"
  | "invalid_claims"
  | "wrong_issuer"
  | "wrong_audience"
  | "expired"
  | "not_yet_valid"
  | "lifetime_exceeded";

/** The token was refused; `reason` is a fixed class, never token contents. */
export class ActorTokenInvalid extends Error {
  readonly reason: ActorTokenReason;

  constructor(reason: ActorTokenReason) {
    super(`actor token refused: ${reason}`);
    this.name = "ActorTokenInvalid";
    this.reason = reason;
  }
}

/** The verified claims (docs/auth.md, "The forwarded actor token"). */
export interface ActorTokenClaims {
  readonly iss: string;
  readonly aud: string;
  readonly sub: string;
  readonly actor_iss: string;
  readonly kind: string;
  readonly roles: readonly string[];
  readonly exec_id?: string;
  readonly cap?: string;
  readonly surface: string;
  readonly approval_id?: string;
  readonly approver?: string;
  readonly iat: number;
  readonly exp: number;
  readonly nbf?: number;
  readonly jti: string;
  readonly [claim: string]: unknown;
}

export interface Jwks {
  readonly keys: readonly JsonWebKey[];
}

export interface VerifierOptions {
  /** The gateway's published JWKS (`actor_token.jwks_out`). */
  readonly jwks: Jwks;
  /** The gateway's issuer (`actor_token.issuer`, default "capgate"). */
  readonly issuer: string;
  /** This upstream's name in the gateway config. */
  readonly audience: string;
  /** Clock skew allowed for exp / iat / nbf, seconds (default 5). */
  readonly leewayS?: number;
  readonly maxLifetimeS?: number;
  /** Current time in seconds; injectable for tests. */
  readonly clock?: () => number;
}

interface VerifyKey {
  readonly alg: "EdDSA" | "ES256";
  readonly key: KeyObject;
}

type JsonObject = Record<string, unknown>;

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isNumber(value: unknown): value is number {
  return typeof value === "number" && Number.isFinite(value);
}

/** Strict unpadded base64url (RFC 7515 §2): no padding, whitespace or other alphabet. */
function b64urlDecode(text: string): Buffer {
  if (!B64URL.test(text) || text.length % 4 === 1) throw new ActorTokenInvalid("malformed");
  return Buffer.from(text, "base64url");
}

function jsonObject(segment: string): JsonObject {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(b64urlDecode(segment)));
  } catch (err) {
    if (err instanceof ActorTokenInvalid) throw err;
    throw new ActorTokenInvalid("malformed");
  }
  if (!isObject(value)) throw new ActorTokenInvalid("malformed");
  return value;
}

function loadJwks(jwks: Jwks): Map<string, VerifyKey> {
  if (!Array.isArray(jwks.keys) || jwks.keys.length === 0) throw new Error("the JWKS has no keys");
  const keys = new Map<string, VerifyKey>();
  for (const jwk of jwks.keys) {
    const { kid, alg } = jwk as { kid?: unknown; alg?: unknown };
    if (typeof kid !== "string" || kid === "" || (alg !== "EdDSA" && alg !== "ES256")) {
      throw new Error("every actor token JWKS key needs a 'kid' and alg EdDSA or ES256");
    }
    if ("d" in jwk) throw new Error("a JWKS for verification must hold public keys only");
    const fits = alg === "EdDSA" ? jwk.kty === "OKP" && jwk.crv === "Ed25519" : jwk.kty === "EC" && jwk.crv === "P-256";
    if (!fits || keys.has(kid)) throw new Error(`JWKS key ${kid}: alg does not fit its key type, or duplicate kid`);
    keys.set(kid, { alg, key: createPublicKey({ key: jwk, format: "jwk" }) });
  }
  return keys;
}

function checkClaims(c: JsonObject): asserts c is JsonObject & ActorTokenClaims {
  const ok =
    STRING_CLAIMS.every((n) => typeof c[n] === "string") &&
    OPTIONAL_STRING_CLAIMS.every((n) => c[n] === undefined || typeof c[n] === "string") &&
    "aud" in c &&
    Array.isArray(c.roles) &&
    c.roles.every((r) => typeof r === "string") &&
    isNumber(c.iat) &&
    isNumber(c.exp) &&
    (c.nbf === undefined || isNumber(c.nbf));
  if (!ok || (c.exp as number) <= (c.iat as number)) throw new ActorTokenInvalid("invalid_claims");
}

/** Verifies actor tokens for one upstream (`audience`) from one gateway (`issuer`). */
export class ActorTokenVerifier {
  private readonly keys: Map<string, VerifyKey>;
  private readonly issuer: string;
  private readonly audience: string;
  private readonly leewayS: number;
  private readonly maxLifetimeS: number;
  private readonly clock: () => number;

  constructor(options: VerifierOptions) {
    if (!options.issuer || !options.audience) {
      throw new Error("an actor token verifier needs the gateway issuer and its audience");
    }
    this.keys = loadJwks(options.jwks);
    this.issuer = options.issuer;
    this.audience = options.audience;
    this.leewayS = options.leewayS ?? 5;
    this.maxLifetimeS = options.maxLifetimeS ?? MAX_LIFETIME_S;
    this.clock = options.clock ?? (() => Date.now() / 1000);
  }

  /** A verifier over the JWKS file the gateway publishes. */
  static fromFile(path: string, options: Omit<VerifierOptions, "jwks">): ActorTokenVerifier {
    return new ActorTokenVerifier({ ...options, jwks: JSON.parse(readFileSync(path, "utf8")) as Jwks });
  }

  /** The verified claims, or `ActorTokenInvalid` with the reason of the first failed check. */
  verify(token: string, options: { now?: number } = {}): ActorTokenClaims {
    const parts = token.split(".");
    if (parts.length !== 3) throw new ActorTokenInvalid("malformed");
    const [h, p, s] = parts as [string, string, string];
    const header = jsonObject(h);
    const claims = jsonObject(p);
    const signature = b64urlDecode(s);
    if ("crit" in header) throw new ActorTokenInvalid("malformed"); // no extension is understood
    if (typeof header.alg !== "string" || !ALLOWED_ALGS.has(header.alg)) throw new ActorTokenInvalid("bad_alg");
    if (header.typ !== TOKEN_TYPE) throw new ActorTokenInvalid("wrong_type");
    // kid is a dictionary key only: never a path or a URL.
    const key = typeof header.kid === "string" ? this.keys.get(header.kid) : undefined;
    if (key === undefined) throw new ActorTokenInvalid("unknown_kid");
    if (header.alg !== key.alg) throw new ActorTokenInvalid("bad_alg");
    if (!this.signatureValid(key, Buffer.from(`${h}.${p}`, "ascii"), signature)) {
      throw new ActorTokenInvalid("bad_signature");
    }
    checkClaims(claims);
    if (claims.iss !== this.issuer) throw new ActorTokenInvalid("wrong_issuer");
    if (typeof claims.aud !== "string" || claims.aud !== this.audience) throw new ActorTokenInvalid("wrong_audience");
    const now = options.now ?? this.clock();
    if (now >= claims.exp + this.leewayS) throw new ActorTokenInvalid("expired");
    if (claims.iat > now + this.leewayS || (claims.nbf ?? 0) > now + this.leewayS) {
      throw new ActorTokenInvalid("not_yet_valid");
    }
    if (claims.exp - claims.iat > this.maxLifetimeS) throw new ActorTokenInvalid("lifetime_exceeded");
    return claims;
  }

  private signatureValid(key: VerifyKey, signingInput: Buffer, signature: Buffer): boolean {
    try {
      if (key.alg === "EdDSA") return cryptoVerify(null, signingInput, key.key, signature);
      if (signature.length !== ES256_SIGNATURE_BYTES) return false;
      return cryptoVerify("sha256", signingInput, { key: key.key, dsaEncoding: "ieee-p1363" }, signature);
    } catch {
      return false; // a signature OpenSSL cannot even parse is simply not valid
    }
  }
}
