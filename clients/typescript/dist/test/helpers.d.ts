/** clients/typescript (tests run from dist/test/). */
export declare const packageRoot: string;
export declare const repoRoot: string;
export declare const vectorsPath: string;
/** `.run/stack.json`, written by `scripts/stack.py start` (contract: the shared test stack). */
export interface Stack {
    readonly agents: string;
    readonly admin: string;
    readonly local_socket: string;
    readonly orders: string;
    readonly tokens: {
        readonly alice: string;
        readonly bob: string;
        readonly bob_agent: string;
        readonly root: string;
    };
    readonly jwks_file: string;
}
export declare const stackPath: string;
/** The running stack, or undefined when none was started. */
export declare function loadStack(): Stack | undefined;
export declare const skipWithoutStack: string | boolean;
