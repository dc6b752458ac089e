package dev.capgate.upstream;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.List;

/**
 * A verified actor token's claims (docs/auth.md, "The forwarded actor token"). The actor's
 * identity is the pair (actorIssuer, subject).
 *
 * @param issuer iss: the gateway
 * @param audience aud: this upstream
 * @param subject sub: the actor id
 * @param actorIssuer actor_iss: the actor's own issuer
 * @param kind user, service, agent or anonymous
 * @param executionId exec_id, null when absent: the gateway reuses a token across executions
 *     (DESIGN §12, amended 2026-12-01) and sends the execution id as metadata beside it
 * @param capability cap, null when absent (then x-capgate-capability)
 * @param approvalId approval_id, null unless the execution resumes an approval
 * @param approver approver, null unless the execution resumes an approval
 * @param issuedAt iat, Unix seconds
 * @param expiresAt exp, Unix seconds
 * @param raw the complete payload as decoded
 */
public record ActorClaims(
    String issuer,
    String audience,
    String subject,
    String actorIssuer,
    String kind,
    List<String> roles,
    String executionId,
    String capability,
    String surface,
    String approvalId,
    String approver,
    String jti,
    double issuedAt,
    double expiresAt,
    ObjectNode raw) {

  public ActorClaims {
    roles = List.copyOf(roles);
    raw = raw.deepCopy();
  }
}
