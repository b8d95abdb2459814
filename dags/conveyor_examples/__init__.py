"""The bundled example workflows' own code: declarations, schemas, models, templates, effects.

Built only on ``conveyor``'s public API (``conveyor.__all__``): what one of them needs that the
library lacks belongs in the library, never here. The DAG files next to this folder import it
(Airflow puts the DAGs folder on ``sys.path``); ``.airflowignore`` keeps the DAG processor from
parsing it for DAGs.
"""
