from django.apps import AppConfig


class StaffAuthConfig(AppConfig):
    name = "staff_auth"
    verbose_name = "Staff sign-in"
    default_auto_field = "django.db.models.BigAutoField"
