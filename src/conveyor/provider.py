"""The provider information Airflow reads through the ``apache_airflow_provider`` entry point.

It makes Conveyor a provider like Airflow's own: listed by ``airflow providers list``, its
``[conveyor]`` options (:data:`conveyor.config.OPTIONS`) known to ``airflow config list``. The
plugin is registered by the ``airflow.plugins`` entry point alone, never here too, so Airflow
loads it once.
"""

from __future__ import annotations

from typing import Any

from conveyor import __version__
from conveyor.config import OPTIONS, SECTION


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-provider-conveyor",
        "name": "Conveyor",
        "description": "Guardrails around the AI steps of business workflows: validation gate, checked AI step, "
        "per-item review queue, item ledger, monitoring.",
        "versions": [__version__],
        # The ledger's connection type: the connection form's fields and its Test button.
        "connection-types": [
            {"connection-type": "conveyor_ledger", "hook-class-name": "conveyor.ledger.hook.LedgerHook"}
        ],
        "config": {
            SECTION: {
                "description": "Conveyor: where the item ledger and the workflows' files live.",
                "options": {
                    name: {
                        "description": description,
                        "version_added": "0.2.0",
                        "type": kind,
                        "example": None,
                        "default": default,
                    }
                    for name, (default, kind, description) in OPTIONS.items()
                },
            }
        },
    }
