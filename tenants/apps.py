from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class TenantsConfig(AppConfig):
    name = "tenants"
    verbose_name = _("Tenants")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from tenants import labels  # the models are loaded only now

        labels.apply()
