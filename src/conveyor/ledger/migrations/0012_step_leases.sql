-- Step leases: which task instance works on an item of a sharded step, until when. A sharded AI step
-- (several mapped task instances over one run) claims chunks of the run's waiting items with
-- FOR UPDATE SKIP LOCKED and writes a lease here, in the same statement; the lease outlives that
-- transaction (a model chunk takes seconds to minutes). A lease is never the guard against double
-- writes (the move out of the from-status is): it only keeps siblings from asking the model twice.
--   holder:  the task instance (dag/run/task/map index): a retry of the same shard re-takes its
--            own leases at once;
--   attempt: the holder's try number: the attempt that wrote a lease never claims it again (items
--            it deferred stay its own until it ends);
--   expires_at: after it, anyone may take the item over (a killed shard).
CREATE TABLE IF NOT EXISTS conveyor.step_leases (
    step       text NOT NULL,
    item_id    text NOT NULL,
    workflow   text NOT NULL,
    holder     text NOT NULL,
    attempt    integer NOT NULL,
    leased_at  timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (step, item_id)
);
-- Renewal and release read a holder's leases of one step.
CREATE INDEX IF NOT EXISTS step_leases_holder ON conveyor.step_leases (step, holder);
