-- Review claims: who has an item open on the review page, until when. A claim is a courtesy shown
-- to other reviewers ("being reviewed by X"), never a lock: decisions stay guarded by the item's
-- from-status. An expired claim is simply ignored (and overwritten by the next claimer).
CREATE TABLE IF NOT EXISTS conveyor.review_claims (
    item_id    text PRIMARY KEY,
    reviewer   text NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
-- Reads of the live claims of a page of the queue look up by item_id (the key); the sweep of
-- expired claims reads by expiry.
CREATE INDEX IF NOT EXISTS review_claims_expiry ON conveyor.review_claims (expires_at);
