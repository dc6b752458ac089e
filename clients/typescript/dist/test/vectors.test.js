/** The actor token verifier against every golden vector (tests/vectors/actor_token). Never skips. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { ActorTokenInvalid, ActorTokenVerifier } from "../src/server/index.js";
import { vectorsPath } from "./helpers.js";
const vectors = JSON.parse(readFileSync(vectorsPath, "utf8"));
describe("actor token golden vectors", () => {
    test("the vectors file is the format this verifier implements", () => {
        assert.equal(vectors.format, "capgate-actor-token-vectors/1");
        assert.ok(vectors.cases.some((c) => c.expect === "valid") && vectors.cases.some((c) => c.expect === "invalid"));
    });
    for (const c of vectors.cases) {
        test(c.name, () => {
            const verifier = new ActorTokenVerifier({
                jwks: vectors.jwks,
                issuer: c.issuer,
                audience: c.audience,
                leewayS: vectors.verifier.leeway_s,
                maxLifetimeS: vectors.verifier.max_lifetime_s,
                clock: () => {
                    throw new Error("the vectors inject `now`; the real clock must not be read");
                },
            });
            if (c.expect === "valid") {
                assert.deepEqual({ ...verifier.verify(c.token, { now: c.now }) }, c.claims);
            }
            else {
                assert.throws(() => verifier.verify(c.token, { now: c.now }), (e) => e instanceof ActorTokenInvalid && e.reason === c.reason, `expected reason ${c.reason}`);
            }
        });
    }
});
//# sourceMappingURL=vectors.test.js.map