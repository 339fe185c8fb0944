from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class StaffAuthConfig(AppConfig):
    name = "staff_auth"
    verbose_name = _("Staff sign-in")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from staff_auth import labels  # the models are loaded only now

        labels.apply()
