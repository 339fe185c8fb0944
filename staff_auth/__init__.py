"""Staff identity: single sign-on (OpenID Connect) and invitations to a tenant.

Above ``tenants`` and beside ``config``'s entry points (pyproject.toml's import contract): it reads and writes the
staff directory (``Tenant``, ``Membership``) and nothing of the conversations, memory or chat layers.
"""
