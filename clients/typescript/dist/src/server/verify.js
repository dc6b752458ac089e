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
import { createPublicKey, verify as cryptoVerify } from "node:crypto";
import { readFileSync } from "node:fs";
export const TOKEN_TYPE = "capgate-actor+jwt";
export const MAX_LIFETIME_S = 60;
const ALLOWED_ALGS = new Set(["EdDSA", "ES256"]);
const ES256_SIGNATURE_BYTES = 64; // raw R || S (RFC 7518 §3.4), never DER
const B64URL = /^[A-Za-z0-9_-]*$/;
const STRING_CLAIMS = ["iss", "sub", "actor_iss", "kind", "exec_id", "cap", "surface", "jti"];
const OPTIONAL_STRING_CLAIMS = ["approval_id", "approver"];
/** The token was refused; `reason` is a fixed class, never token contents. */
export class ActorTokenInvalid extends Error {
    reason;
    constructor(reason) {
        super(`actor token refused: ${reason}`);
        this.name = "ActorTokenInvalid";
        this.reason = reason;
    }
}
function isObject(value) {
    return typeof value === "object" && value !== null && !Array.isArray(value);
}
function isNumber(value) {
    return typeof value === "number" && Number.isFinite(value);
}
/** Strict unpadded base64url (RFC 7515 §2): no padding, whitespace or other alphabet. */
function b64urlDecode(text) {
    if (!B64URL.test(text) || text.length % 4 === 1)
        throw new ActorTokenInvalid("malformed");
    return Buffer.from(text, "base64url");
}
function jsonObject(segment) {
    let value;
    try {
        value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(b64urlDecode(segment)));
    }
    catch (err) {
        if (err instanceof ActorTokenInvalid)
            throw err;
        throw new ActorTokenInvalid("malformed");
    }
    if (!isObject(value))
        throw new ActorTokenInvalid("malformed");
    return value;
}
function loadJwks(jwks) {
    if (!Array.isArray(jwks.keys) || jwks.keys.length === 0)
        throw new Error("the JWKS has no keys");
    const keys = new Map();
    for (const jwk of jwks.keys) {
        const { kid, alg } = jwk;
        if (typeof kid !== "string" || kid === "" || (alg !== "EdDSA" && alg !== "ES256")) {
            throw new Error("every actor token JWKS key needs a 'kid' and alg EdDSA or ES256");
        }
        if ("d" in jwk)
            throw new Error("a JWKS for verification must hold public keys only");
        const fits = alg === "EdDSA" ? jwk.kty === "OKP" && jwk.crv === "Ed25519" : jwk.kty === "EC" && jwk.crv === "P-256";
        if (!fits || keys.has(kid))
            throw new Error(`JWKS key ${kid}: alg does not fit its key type, or duplicate kid`);
        keys.set(kid, { alg, key: createPublicKey({ key: jwk, format: "jwk" }) });
    }
    return keys;
}
function checkClaims(c) {
    const ok = STRING_CLAIMS.every((n) => typeof c[n] === "string") &&
        OPTIONAL_STRING_CLAIMS.every((n) => c[n] === undefined || typeof c[n] === "string") &&
        "aud" in c &&
        Array.isArray(c.roles) &&
        c.roles.every((r) => typeof r === "string") &&
        isNumber(c.iat) &&
        isNumber(c.exp) &&
        (c.nbf === undefined || isNumber(c.nbf));
    if (!ok || c.exp <= c.iat)
        throw new ActorTokenInvalid("invalid_claims");
}
/** Verifies actor tokens for one upstream (`audience`) from one gateway (`issuer`). */
export class ActorTokenVerifier {
    keys;
    issuer;
    audience;
    leewayS;
    maxLifetimeS;
    clock;
    constructor(options) {
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
    static fromFile(path, options) {
        return new ActorTokenVerifier({ ...options, jwks: JSON.parse(readFileSync(path, "utf8")) });
    }
    /** The verified claims, or `ActorTokenInvalid` with the reason of the first failed check. */
    verify(token, options = {}) {
        const parts = token.split(".");
        if (parts.length !== 3)
            throw new ActorTokenInvalid("malformed");
        const [h, p, s] = parts;
        const header = jsonObject(h);
        const claims = jsonObject(p);
        const signature = b64urlDecode(s);
        if ("crit" in header)
            throw new ActorTokenInvalid("malformed"); // no extension is understood
        if (typeof header.alg !== "string" || !ALLOWED_ALGS.has(header.alg))
            throw new ActorTokenInvalid("bad_alg");
        if (header.typ !== TOKEN_TYPE)
            throw new ActorTokenInvalid("wrong_type");
        // kid is a dictionary key only: never a path or a URL.
        const key = typeof header.kid === "string" ? this.keys.get(header.kid) : undefined;
        if (key === undefined)
            throw new ActorTokenInvalid("unknown_kid");
        if (header.alg !== key.alg)
            throw new ActorTokenInvalid("bad_alg");
        if (!this.signatureValid(key, Buffer.from(`${h}.${p}`, "ascii"), signature)) {
            throw new ActorTokenInvalid("bad_signature");
        }
        checkClaims(claims);
        if (claims.iss !== this.issuer)
            throw new ActorTokenInvalid("wrong_issuer");
        if (typeof claims.aud !== "string" || claims.aud !== this.audience)
            throw new ActorTokenInvalid("wrong_audience");
        const now = options.now ?? this.clock();
        if (now >= claims.exp + this.leewayS)
            throw new ActorTokenInvalid("expired");
        if (claims.iat > now + this.leewayS || (claims.nbf ?? 0) > now + this.leewayS) {
            throw new ActorTokenInvalid("not_yet_valid");
        }
        if (claims.exp - claims.iat > this.maxLifetimeS)
            throw new ActorTokenInvalid("lifetime_exceeded");
        return claims;
    }
    signatureValid(key, signingInput, signature) {
        try {
            if (key.alg === "EdDSA")
                return cryptoVerify(null, signingInput, key.key, signature);
            if (signature.length !== ES256_SIGNATURE_BYTES)
                return false;
            return cryptoVerify("sha256", signingInput, { key: key.key, dsaEncoding: "ieee-p1363" }, signature);
        }
        catch {
            return false; // a signature OpenSSL cannot even parse is simply not valid
        }
    }
}
//# sourceMappingURL=verify.js.map