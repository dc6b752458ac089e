/** capgate's TypeScript client: `CapgateClient` for callers, `ApprovalAdminClient` for approvers. */
export { ApprovalAdminClient, CapgateClient, } from "./client.js";
export { CapgateError } from "./errors.js";
export { unwrap, } from "./envelope.js";
//# sourceMappingURL=index.js.map