package dev.capgate.client;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.Map;

/** The one JSON mapper of the client: inputs are encoded and outputs decoded with it. */
final class Json {
  // Unknown members are ignored: callers decode outputs into records naming only what they use.
  static final ObjectMapper MAPPER =
      new ObjectMapper().disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);
  private static final TypeReference<Map<String, Object>> MAP = new TypeReference<>() {};

  private Json() {}

  static byte[] encode(Object value) {
    try {
      return MAPPER.writeValueAsBytes(value);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("capgate: the input is not JSON-encodable", e);
    }
  }

  static Map<String, Object> decodeObject(String json) {
    if (json.isBlank()) {
      return Map.of();
    }
    try {
      return MAPPER.readValue(json, MAP);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("capgate: the gateway sent JSON that is not an object", e);
    }
  }

  static <T> T decode(String json, Class<T> type) {
    try {
      return MAPPER.readValue(json, type);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("capgate: the output does not fit " + type.getName(), e);
    }
  }
}
