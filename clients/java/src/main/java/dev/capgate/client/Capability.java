package dev.capgate.client;

import java.util.List;
import java.util.Map;

/**
 * One capability the caller may see on this listener's surface.
 *
 * @param inputSchema the JSON Schema of the input, decoded
 * @param sideEffect none, read, write or destructive
 * @param risk low, medium, high or critical
 */
public record Capability(
    String id,
    String description,
    Map<String, Object> inputSchema,
    String sideEffect,
    String risk,
    List<String> tags,
    boolean requiresApproval) {

  /** A Describe answer; {@code revision} is the config and policy revision. */
  public record Catalog(List<Capability> capabilities, String revision) {
    public Catalog {
      capabilities = List.copyOf(capabilities);
    }

    /** The capability with this id, if visible. */
    public java.util.Optional<Capability> find(String id) {
      return capabilities.stream().filter(c -> c.id().equals(id)).findFirst();
    }
  }
}
