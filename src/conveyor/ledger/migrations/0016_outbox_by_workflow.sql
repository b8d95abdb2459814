-- The outbox of one workflow, newest first (`conveyor outbox --workflow W`): effects are keyed by
-- item id (or `<workflow>:report:<run>` for a publication), whose first part is the workflow.
CREATE INDEX IF NOT EXISTS effects_workflow_claimed
    ON conveyor.effects (split_part(item_id, ':', 1), claimed_at DESC);
