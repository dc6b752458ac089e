/** Shared test helpers: where the repository, the golden vectors and the shared stack are. */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** clients/typescript (tests run from dist/test/). */
export const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const repoRoot = resolve(packageRoot, "..", "..");
export const vectorsPath = join(repoRoot, "tests", "vectors", "actor_token", "vectors.json");

/** `.run/stack.json`, written by `scripts/stack.py start` (contract: the shared test stack). */
export interface Stack {
  readonly agents: string;
  readonly admin: string;
  readonly local_socket: string;
  readonly orders: string;
  readonly tokens: {
    readonly alice: string;
    readonly bob: string;
    readonly carol: string;
    readonly bob_agent: string;
    readonly root: string;
  };
  readonly jwks_file: string;
}

export const stackPath = process.env.CAPGATE_STACK ?? join(repoRoot, ".run", "stack.json");

/** The running stack, or undefined when none was started. */
export function loadStack(): Stack | undefined {
  if (!existsSync(stackPath)) return undefined;
  return JSON.parse(readFileSync(stackPath, "utf8")) as Stack;
}

export const skipWithoutStack = existsSync(stackPath)
  ? false
  : `no shared stack at ${stackPath}: run \`python scripts/stack.py start\` (\`make test\` does)`;
