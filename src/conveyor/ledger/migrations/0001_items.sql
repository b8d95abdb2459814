-- The first ledger schema: items and their audit trail.
CREATE SCHEMA IF NOT EXISTS conveyor;

CREATE TABLE conveyor.items (
    item_id      text PRIMARY KEY,              -- '<workflow>:<business key>'
    workflow     text NOT NULL,
    business_key text NOT NULL,
    run_id       text NOT NULL,                 -- the Airflow run that carries the item
    status       text NOT NULL,
    payload      jsonb NOT NULL,
    input_hash   text NOT NULL,                 -- sha256 of the canonical payload
    attempts     integer NOT NULL DEFAULT 0,
    last_error   text,
    ai_result    jsonb,
    confidence   double precision,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX items_workflow_run_status ON conveyor.items (workflow, run_id, status);

-- One row per status change, written in the same statement as the change itself.
-- No foreign key on purpose: the row is written by the statement that moves the item, so it
-- cannot dangle, and a key check per row would halve the set-based write rate.
CREATE TABLE conveyor.transitions (
    id          bigserial PRIMARY KEY,
    item_id     text NOT NULL,
    run_id      text NOT NULL,
    from_status text,                           -- NULL when the item was received
    to_status   text NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    actor       text NOT NULL,                  -- 'dag.task#try' or a reviewer's name
    reason      text
);
CREATE INDEX transitions_item ON conveyor.transitions (item_id, id);
