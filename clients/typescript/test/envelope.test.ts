/** The envelope as native values, error mapping and connection options (no server needed). */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ExecutionResultSchema } from "../src/gen/capgate/v1/gateway_pb.js";
import {
  ApprovalStatus,
  CapabilityErrorSchema,
  ErrorCode as PbErrorCode,
  ExecutionState,
} from "../src/gen/capgate/v1/types_pb.js";
import { outcomeFromProto } from "../src/envelope.js";
import { CapgateClient, CapgateError, unwrap, type ErrorCode } from "../src/index.js";

describe("outcomeFromProto", () => {
  test("completed: output decoded from JSON, duration in milliseconds", () => {
    const outcome = outcomeFromProto(
      create(ExecutionResultSchema, {
        executionId: "e1",
        capabilityId: "orders.get",
        attempts: 2,
        duration: { seconds: 1n, nanos: 500_000_000 },
        executionState: ExecutionState.COMPLETED,
        outcome: { case: "completed", value: { outputJson: '{"order_id":"o-1","n":[1,2]}' } },
      }),
    );
    assert.equal(outcome.kind, "completed");
    assert.deepEqual(unwrap(outcome), { order_id: "o-1", n: [1, 2] });
    assert.equal(outcome.durationMs, 1500);
    assert.equal(outcome.attempts, 2);
    assert.equal(outcome.executionState, "COMPLETED");
  });

  test("failed: the CapgateError keeps code, issues and the execution id", () => {
    const outcome = outcomeFromProto(
      create(ExecutionResultSchema, {
        executionId: "e2",
        outcome: {
          case: "failed",
          value: {
            code: PbErrorCode.INPUT_INVALID,
            stage: "input-validation",
            message: "The input is invalid.",
            exposeToModel: true,
            issues: [{ path: "$.amount", message: "must be a number" }],
            executionState: ExecutionState.NOT_STARTED,
          },
        },
      }),
    );
    assert.equal(outcome.kind, "failed");
    assert.throws(
      () => unwrap(outcome),
      (e: unknown) =>
        e instanceof CapgateError &&
        e.code === "INPUT_INVALID" &&
        e.message === "The input is invalid." &&
        e.executionId === "e2" &&
        e.issues[0]?.path === "$.amount" &&
        e.executionState === "NOT_STARTED" &&
        e.grpcCode === undefined,
    );
  });

  test("failed RATE_LIMITED: retryAfterSeconds from the envelope's retry_after", () => {
    const outcome = outcomeFromProto(
      create(ExecutionResultSchema, {
        executionId: "e5",
        outcome: {
          case: "failed",
          value: {
            code: PbErrorCode.RATE_LIMITED,
            stage: "limits",
            retryable: true,
            retryAfter: { seconds: 2n, nanos: 500_000_000 },
            executionState: ExecutionState.NOT_STARTED,
          },
        },
      }),
    );
    assert.throws(
      () => unwrap(outcome),
      (e: unknown) =>
        e instanceof CapgateError &&
        e.code === "RATE_LIMITED" &&
        e.retryable &&
        e.retryAfterSeconds === 2.5,
    );
  });

  test("approval_required: the approval is native, and unwrap throws APPROVAL_PENDING", () => {
    const outcome = outcomeFromProto(
      create(ExecutionResultSchema, {
        executionId: "e3",
        outcome: {
          case: "approvalRequired",
          value: {
            approval: {
              id: "apr-1",
              status: ApprovalStatus.PENDING,
              inputHash: "ab",
              createdAt: { seconds: 1_700_000_000n, nanos: 0 },
              approvers: { roles: ["manager"] },
            },
          },
        },
      }),
    );
    assert.equal(outcome.kind, "approval_required");
    if (outcome.kind !== "approval_required") return;
    assert.equal(outcome.approval.status, "PENDING");
    assert.deepEqual(outcome.approval.approverRoles, ["manager"]);
    assert.equal(outcome.approval.createdAt?.getTime(), 1_700_000_000_000);
    assert.equal(outcome.approval.input, undefined);
    assert.throws(() => unwrap(outcome), (e: unknown) => e instanceof CapgateError && e.code === "APPROVAL_PENDING");
  });

  test("cancelled is its own kind", () => {
    const outcome = outcomeFromProto(
      create(ExecutionResultSchema, {
        outcome: { case: "cancelled", value: { code: PbErrorCode.TIMEOUT, executionState: ExecutionState.UNKNOWN } },
      }),
    );
    assert.equal(outcome.kind, "cancelled");
    if (outcome.kind === "cancelled") assert.equal(outcome.error.code, "TIMEOUT");
  });

  test("an envelope without an outcome is a protocol fault", () => {
    assert.throws(() => outcomeFromProto(create(ExecutionResultSchema, {})), CapgateError);
  });

  test("a custom JSON codec sees the exact output text (e.g. to keep 64-bit integers)", () => {
    const raw = '{"total_cents":9007199254740993}';
    const outcome = outcomeFromProto<string>(
      create(ExecutionResultSchema, { outcome: { case: "completed", value: { outputJson: raw } } }),
      { parse: (text) => text, stringify: JSON.stringify },
    );
    assert.equal(unwrap(outcome), raw);
  });
});

describe("error codes", () => {
  test("every generated ErrorCode has a name, and unknown values read as UNSPECIFIED", () => {
    const names = Object.keys(PbErrorCode).filter((k) => Number.isNaN(Number(k)));
    assert.ok(names.includes("POLICY_DENIED") && names.includes("APPROVAL_LIMIT_EXCEEDED"));
    for (const name of names) {
      const err = CapgateError.fromProto(create(CapabilityErrorSchema, { code: PbErrorCode[name as ErrorCode] }));
      assert.equal(err.code, name);
    }
    assert.equal(CapgateError.fromProto(create(CapabilityErrorSchema, { code: 999 as PbErrorCode })).code, "UNSPECIFIED");
  });

  test("transport faults keep their gRPC code and map to the governed one where it exists", () => {
    const cases: [Code, ErrorCode][] = [
      [Code.DeadlineExceeded, "TIMEOUT"],
      [Code.Canceled, "CANCELLED"],
      [Code.Unauthenticated, "UNAUTHENTICATED"],
      [Code.PermissionDenied, "FORBIDDEN"],
      [Code.Unavailable, "UNSPECIFIED"],
    ];
    for (const [grpc, code] of cases) {
      const err = CapgateError.fromTransport(new ConnectError("x", grpc));
      assert.equal(err.code, code);
      assert.equal(err.grpcCode, grpc);
      assert.equal(err.retryable, grpc === Code.Unavailable);
    }
    const aborted = CapgateError.fromTransport(new DOMException("aborted", "AbortError"));
    assert.equal(aborted.code, "CANCELLED");
  });
});

describe("connection options", () => {
  test("a token and a local actor together are refused", () => {
    assert.throws(
      () => CapgateClient.connect({ target: "unix:/tmp/x.sock", token: "t", localActor: { id: "a" } }),
      TypeError,
    );
  });

  test("trusted-local metadata is refused on a TCP target", () => {
    assert.throws(() => CapgateClient.connect({ target: "127.0.0.1:1", localActor: { id: "a" } }), TypeError);
  });

  test("an unreachable gateway rejects with a retryable CapgateError", async () => {
    const client = CapgateClient.connect({ target: "127.0.0.1:1", token: "t", defaultTimeoutMs: 2_000 });
    try {
      await assert.rejects(client.describe(), (e: unknown) => e instanceof CapgateError && e.grpcCode === Code.Unavailable && e.retryable);
    } finally {
      client.close();
    }
  });
});
