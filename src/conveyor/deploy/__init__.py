"""Deployment helpers: loading ``airflow_settings.yaml``, the admin user and the ledger database.

Each module is also a command (``python -m conveyor.deploy.<module>``) that the native quickstart
and the ``airflow-init`` service of ``docker-compose.yaml`` call the same way.
"""
