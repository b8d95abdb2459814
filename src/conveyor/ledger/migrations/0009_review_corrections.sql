-- A reviewer's correction is audited field by field: the transition row that records a decision
-- carries what changed ({"changes": [{"field", "before", "after"}], ...}); the gate's quarantine
-- records which gate, suite and item field found the problem, so a correction lands in that field
-- and is validated again by that gate. NULL for every row written before (and for plain moves).
ALTER TABLE conveyor.transitions ADD COLUMN detail jsonb;

-- What an AI step promises of its answers (output JSON schema, rule checks, label field), stored
-- when the step runs, so the API server can check a reviewer's correction of an answer without
-- importing the DAG. One row per workflow and status the step writes; the latest run's wins.
CREATE TABLE conveyor.ai_tasks (
    workflow    text NOT NULL,
    to_status   text NOT NULL,
    name        text NOT NULL,
    definition  jsonb NOT NULL,
    declared_by text,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow, to_status)
);
