import type { Transport } from "@connectrpc/connect";
/** TLS settings; PEM text or buffers. `ca` defaults to Node's trusted roots. */
export interface TlsOptions {
    readonly ca?: string | Buffer;
    /** Client certificate and key for mTLS listeners. */
    readonly cert?: string | Buffer;
    readonly key?: string | Buffer;
    /** Expected server name when it differs from the target host. */
    readonly serverName?: string;
}
/** The actor a co-located app asserts on a trusted-local unix socket (docs/auth.md). */
export interface LocalActor {
    readonly id: string;
    /** user (default), service, agent or anonymous. */
    readonly kind?: "user" | "service" | "agent" | "anonymous";
    readonly roles?: readonly string[];
}
export interface ConnectOptions {
    /** `host:port`, `unix:/path/to/capgate.sock` (or `unix:///path`), or an http(s):// URL. */
    readonly target: string;
    /** `true` for TLS with Node's trusted roots, or explicit settings. Plaintext by default. */
    readonly tls?: boolean | TlsOptions;
    /** Bearer JWT sent as `authorization`, or a function returning a fresh one per call. */
    readonly token?: string | (() => string | Promise<string>);
    /** Trusted-local actor metadata; unix sockets only. */
    readonly localActor?: LocalActor;
    /** Deadline applied to every call that sets none of its own. */
    readonly defaultTimeoutMs?: number;
}
export interface Connection {
    readonly transport: Transport;
    readonly defaultTimeoutMs: number | undefined;
    close(): void;
}
/** Open (lazily) one HTTP/2 connection to `options.target`. */
export declare function openConnection(options: ConnectOptions): Connection;
