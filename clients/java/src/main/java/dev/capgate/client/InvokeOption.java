package dev.capgate.client;

import java.util.Map;

/** Optional fields of an Invoke or Resume. */
public sealed interface InvokeOption {

  /** A repeat with the same key and input returns the recorded result. */
  static InvokeOption idempotencyKey(String key) {
    return new IdempotencyKey(key);
  }

  /** Tags the execution (audit, traces) with the caller's own id. */
  static InvokeOption correlationId(String id) {
    return new CorrelationId(id);
  }

  /** Request metadata that policies may read (when the gateway allow-lists it). */
  static InvokeOption metadata(Map<String, String> metadata) {
    return new Metadata(Map.copyOf(metadata));
  }

  record IdempotencyKey(String key) implements InvokeOption {}

  record CorrelationId(String id) implements InvokeOption {}

  record Metadata(Map<String, String> values) implements InvokeOption {}
}
