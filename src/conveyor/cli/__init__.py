"""The ``conveyor`` command line. Imports nothing of Airflow on the read paths."""
