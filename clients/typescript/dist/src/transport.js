/**
 * One gRPC (HTTP/2) connection to a capgate listener: TCP or a unix socket, TLS optional, and the
 * caller's credentials — a bearer JWT, or on a unix socket the trusted-local actor metadata.
 */
import * as net from "node:net";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
function unixPath(target) {
    if (!target.startsWith("unix:"))
        return undefined;
    const rest = target.slice("unix:".length);
    return rest.startsWith("//") ? rest.slice(2) : rest;
}
function credentialsInterceptor(options) {
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
export function openConnection(options) {
    if (options.token !== undefined && options.localActor !== undefined) {
        throw new TypeError("pass either token or localActor, not both");
    }
    const path = unixPath(options.target);
    if (options.localActor !== undefined && path === undefined) {
        // trusted-local is only sound where the kernel decides who may connect (docs/auth.md).
        throw new TypeError("localActor needs a unix: target (trusted-local listeners are unix sockets)");
    }
    const tls = options.tls === true ? {} : options.tls === false ? undefined : options.tls;
    let baseUrl;
    let nodeOptions = {};
    if (path !== undefined) {
        if (tls !== undefined)
            throw new TypeError("TLS over a unix socket is not supported");
        if (path === "")
            throw new TypeError("unix: target without a socket path");
        baseUrl = "http://localhost";
        nodeOptions = { createConnection: () => net.connect(path) };
    }
    else if (/^https?:\/\//.test(options.target)) {
        baseUrl = options.target;
    }
    else {
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
//# sourceMappingURL=transport.js.map