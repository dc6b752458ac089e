/** Shared test helpers: where the repository, the golden vectors and the shared stack are. */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
/** clients/typescript (tests run from dist/test/). */
export const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const repoRoot = resolve(packageRoot, "..", "..");
export const vectorsPath = join(repoRoot, "tests", "vectors", "actor_token", "vectors.json");
export const stackPath = process.env.CAPGATE_STACK ?? join(repoRoot, ".run", "stack.json");
/** The running stack, or undefined when none was started. */
export function loadStack() {
    if (!existsSync(stackPath))
        return undefined;
    return JSON.parse(readFileSync(stackPath, "utf8"));
}
export const skipWithoutStack = existsSync(stackPath)
    ? false
    : `no shared stack at ${stackPath}: run \`python scripts/stack.py start\` (or \`make test-clients\`) first`;
//# sourceMappingURL=helpers.js.map