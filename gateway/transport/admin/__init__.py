"""The admin services, served on admin listeners only (DESIGN §12): `PolicyAdmin` (`policy`),
`ApprovalAdmin` (`approvals`) and `CacheAdmin` (`cache`)."""
