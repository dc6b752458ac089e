"""Reference governance hooks (docs/hooks.md): a customer-standing lookup and an output DLP."""
