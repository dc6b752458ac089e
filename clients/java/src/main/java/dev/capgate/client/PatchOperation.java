package dev.capgate.client;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import java.util.List;

/**
 * One RFC 6902 JSON Patch operation: the change an approver made to a call's input. The gateway
 * writes {@code add}, {@code remove} and {@code replace}, with {@code path} an RFC 6901 pointer
 * ({@code "/amount"}) and {@code value} the new JSON value (decoded as Jackson decodes JSON into
 * {@code Object}: Integer, Double, String, Map, List, ...).
 *
 * @param from set only on move and copy operations
 */
public record PatchOperation(String op, String path, String from, Object value) {
  private static final TypeReference<List<PatchOperation>> LIST = new TypeReference<>() {};

  /** A {@code patch_json} field: empty for an empty one. */
  static List<PatchOperation> decodeAll(String json) {
    if (json.isBlank()) {
      return List.of();
    }
    try {
      return List.copyOf(Json.MAPPER.readValue(json, LIST));
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("capgate: the gateway sent a patch that is not a JSON Patch", e);
    }
  }
}
