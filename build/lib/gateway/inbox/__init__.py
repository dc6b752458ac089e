"""The approver web inbox (`capgate inbox`): a small server-rendered app over ApprovalAdmin.

Humans authenticate with a bearer JWT (validated exactly like the gateway's listeners) or a
signed identity assertion from an authenticating proxy. The inbox calls ApprovalAdmin under its
own allow-listed identity with `on_behalf_of` = the human; approver constraints, self-approval
and the input-hash check are enforced by ApprovalAdmin, never by the page.
"""
