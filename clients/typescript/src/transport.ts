/**
 * One gRPC (HTTP/2) connection to a capgate listener: TCP or a unix socket, TLS optional, and the
 * caller's credentials — a bearer JWT, or on a unix socket the trusted-local actor metadata.
 */
import * as net from "node:net";
import type { Interceptor, Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type * as http2 from "node:http2";

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

function unixPath(target: string): string | undefined {
  if (!target.startsWith("unix:")) return undefined;
  const rest = target.slice("unix:".length);
  return rest.startsWith("//") ? rest.slice(2) : rest;
}

function credentialsInterceptor(options: ConnectOptions): Interceptor | undefined {
  const { token, localActor } = options;
  if (token !== undefined) {
    return (next) => async (req) => {
      const value = typeof token === "function" ? await token() : token;
      req.header.set("authorization", `Bearer ${value}`);
      return next(req);
    };
  }
  if (localActor !== undefined) {
    return (next) => async (req) => {
      req.header.set("x-capgate-actor-id", localActor.id);
      req.header.set("x-capgate-actor-kind", localActor.kind ?? "user");
      if (localActor.roles !== undefined && localActor.roles.length > 0) {
        req.header.set("x-capgate-actor-roles", localActor.roles.join(","));
      }
      return next(req);
    };
  }
  return undefined;
}

/** Open (lazily) one HTTP/2 connection to `options.target`. */
export function openConnection(options: ConnectOptions): Connection {
  if (options.token !== undefined && options.localActor !== undefined) {
    throw new TypeError("pass either token or localActor, not both");
  }
  const path = unixPath(options.target);
  if (options.localActor !== undefined && path === undefined) {
    // trusted-local is only sound where the kernel decides who may connect (docs/auth.md).
    throw new TypeError("localActor needs a unix: target (trusted-local listeners are unix sockets)");
  }
  const tls = options.tls === true ? {} : options.tls === false ? undefined : options.tls;
  let baseUrl: string;
  let nodeOptions: http2.ClientSessionOptions | http2.SecureClientSessionOptions = {};
  if (path !== undefined) {
    if (tls !== undefined) throw new TypeError("TLS over a unix socket is not supported");
    if (path === "") throw new TypeError("unix: target without a socket path");
    baseUrl = "http://localhost";
    nodeOptions = { createConnection: () => net.connect(path) };
  } else if (/^https?:\/\//.test(options.target)) {
    baseUrl = options.target;
  } else {
    baseUrl = `${tls !== undefined ? "https" : "http"}://${options.target}`;
  }
  if (tls !== undefined) {
    nodeOptions = {
      ...(tls.ca !== undefined ? { ca: tls.ca } : {}),
      ...(tls.cert !== undefined ? { cert: tls.cert } : {}),
      ...(tls.key !== undefined ? { key: tls.key } : {}),
      ...(tls.serverName !== undefined ? { servername: tls.serverName } : {}),
    };
  }
  const sessionManager = new Http2SessionManager(baseUrl, {}, nodeOptions);
  const credentials = credentialsInterceptor(options);
  const transport = createGrpcTransport({
    baseUrl,
    sessionManager,
    interceptors: credentials === undefined ? [] : [credentials],
  });
  return {
    transport,
    defaultTimeoutMs: options.defaultTimeoutMs,
    close: () => sessionManager.abort(),
  };
}
