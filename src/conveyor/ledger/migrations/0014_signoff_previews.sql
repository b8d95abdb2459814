-- Sign-off previews: the full rendering of the report a sign-off approves (every output of the
-- sign-off's publish step, e.g. report.md and report.html), stored when the sign-off task runs and
-- served by the Conveyor app at /conveyor/review/signoff/<workflow>/<run id>/<task>/<file>, which
-- the sign-off prompt links to. One row per sign-off task of a run: a retry or a clear of the task
-- replaces it. Not item data: no audit row (the sign-off's answer is Airflow's HITL record).
CREATE TABLE IF NOT EXISTS conveyor.signoff_previews (
    workflow     text NOT NULL,
    run_id       text NOT NULL,
    task_id      text NOT NULL,
    -- the publish step whose rendering this is
    source_task  text NOT NULL,
    -- the outputs in the publish step's order: [{"name": "report.md", "text": "..."}, ...]
    files        jsonb NOT NULL,
    -- the items the sign-off approves (and the preview renders)
    items        integer NOT NULL,
    rendered_by  text,
    rendered_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow, run_id, task_id)
);
