package dev.capgate.upstream;

/**
 * A refused actor token. The message is the reason class only, never token contents.
 *
 * <p>Reasons, in check order (tests/vectors/actor_token/README.md): malformed, bad_alg,
 * wrong_type, unknown_kid, bad_alg, bad_signature, invalid_claims, wrong_issuer, wrong_audience,
 * expired, not_yet_valid, lifetime_exceeded.
 */
public final class InvalidActorTokenException extends Exception {
  private static final long serialVersionUID = 1L;
  private final String reason;

  public InvalidActorTokenException(String reason) {
    super("actor token invalid: " + reason);
    this.reason = reason;
  }

  /** The reason class, for example "expired". */
  public String reason() {
    return reason;
  }
}
