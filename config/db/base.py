"""Database backend for the embedded PostgreSQL: the stock PostgreSQL backend
that starts the pgserver cluster on first connection and connects over its
Unix socket as the non-superuser app role."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.backends.postgresql import base

from config.embedded_pg import ensure_embedded


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self) -> dict[str, Any]:
        server = ensure_embedded(settings.EMBEDDED_PG_DIR)
        self.settings_dict["HOST"] = server.socket_dir
        return super().get_connection_params()
