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
import { type JsonWebKey } from "node:crypto";
export declare const TOKEN_TYPE = "capgate-actor+jwt";
export declare const MAX_LIFETIME_S = 60;
export type ActorTokenReason = "malformed" | "bad_alg" | "wrong_type" | "unknown_kid" | "bad_signature" | "invalid_claims" | "wrong_issuer" | "wrong_audience" | "expired" | "not_yet_valid" | "lifetime_exceeded";
/** The token was refused; `reason` is a fixed class, never token contents. */
export declare class ActorTokenInvalid extends Error {
    readonly reason: ActorTokenReason;
    constructor(reason: ActorTokenReason);
}
/** The verified claims (docs/auth.md, "The forwarded actor token"). */
export interface ActorTokenClaims {
    readonly iss: string;
    readonly aud: string;
    readonly sub: string;
    readonly actor_iss: string;
    readonly kind: string;
    readonly roles: readonly string[];
    readonly exec_id: string;
    readonly cap: string;
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
/** Verifies actor tokens for one upstream (`audience`) from one gateway (`issuer`). */
export declare class ActorTokenVerifier {
    private readonly keys;
    private readonly issuer;
    private readonly audience;
    private readonly leewayS;
    private readonly maxLifetimeS;
    private readonly clock;
    constructor(options: VerifierOptions);
    /** A verifier over the JWKS file the gateway publishes. */
    static fromFile(path: string, options: Omit<VerifierOptions, "jwks">): ActorTokenVerifier;
    /** The verified claims, or `ActorTokenInvalid` with the reason of the first failed check. */
    verify(token: string, options?: {
        now?: number;
    }): ActorTokenClaims;
    private signatureValid;
}
