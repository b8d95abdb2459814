-- Per-item review escalations: which item a review step escalated (alerted a person about, or
-- rejected) because it waited longer than the step's item_timeout. One row per wait: an item
-- that comes back to the queue (a correction that fails again) starts a new wait, escalated anew.
-- The primary key makes an escalation happen once, whichever attempt of the step gets there first.
CREATE TABLE IF NOT EXISTS conveyor.review_escalations (
    item_id       text NOT NULL,
    step          text NOT NULL,
    waiting_since timestamptz NOT NULL,
    workflow      text NOT NULL,
    run_id        text NOT NULL,
    action        text NOT NULL,
    escalated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (item_id, step, waiting_since)
);
CREATE INDEX IF NOT EXISTS review_escalations_run ON conveyor.review_escalations (workflow, run_id);
