# Conveyor's image: the official Airflow 3.3.2 image plus the project, installed from its pinned set.
# docker-compose.yaml builds it; it also runs on its own (the project's folders are copied in).
FROM apache/airflow:3.3.2-python3.11

# The official image installs as its `airflow` user, never as root.
USER airflow

WORKDIR /opt/conveyor
COPY --chown=airflow:0 pyproject.toml README.md constraints.txt ./
COPY --chown=airflow:0 src ./src
# constraints.txt is the project's pinned set (the one the tests ran with). Airflow is named with its
# version so pip can never move it; celery<5.7 because Celery 5.7 breaks
# apache-airflow-providers-celery 3.26 (import error in the scheduler and worker, `pip check` silent).
# The s3 extra brings Airflow's amazon provider and s3fs, for a storage base on S3.
RUN pip install --no-cache-dir -c constraints.txt "apache-airflow==3.3.2" ".[celery,s3]" "celery<5.7"

WORKDIR /opt/airflow
# The project laid out as Astro does; docker-compose.yaml mounts the live folders over these.
COPY --chown=airflow:0 dags ./dags
COPY --chown=airflow:0 include ./include
COPY --chown=airflow:0 airflow_settings.yaml ./airflow_settings.yaml
# The folders compose's named volumes start from: group 0 writable, so any AIRFLOW_UID can write.
RUN mkdir -p /opt/airflow/auth /opt/airflow/conveyor /opt/airflow/conveyor-files /opt/airflow/plugins \
    && chmod -R g+rwX /opt/airflow/auth /opt/airflow/conveyor /opt/airflow/conveyor-files
