-- The guardrail measured (issue 25): what each AI step did with its answers, and what people said
-- of the answers they saw. From these the error rate of what passed unreviewed is estimated.

-- One row per committed chunk of an AI step: how many answers passed, were spot-checked or were
-- routed to review by the checks, and the confidence of the answers that passed (and of those
-- routed for low confidence alone) in 101 buckets (floor(confidence * 100)): what the threshold
-- curve needs to say which share a different threshold would send to review. Only items the
-- chunk's move actually moved are counted, so a retried commit counts nothing twice.
CREATE TABLE conveyor.ai_step_tallies (
    id                     bigserial PRIMARY KEY,
    workflow               text NOT NULL,
    step                   text NOT NULL,            -- the AI step's task id
    run_id                 text NOT NULL,
    at                     timestamptz NOT NULL DEFAULT now(),
    min_confidence         double precision NOT NULL,
    spot_check             double precision NOT NULL,  -- the share of passing answers sent to review
    max_error_rate         double precision,           -- the step's declared target (NULL: none)
    seed                   text NOT NULL,              -- what the spot checks were drawn with
    passed                 integer NOT NULL,           -- moved on unreviewed
    spot_checked           integer NOT NULL,           -- passed every check, sent to review at random
    exceptions             integer NOT NULL,           -- routed to review by a check or a failure
    passed_by_confidence   integer[] NOT NULL,         -- answers that passed (spot checks included)
    low_only_by_confidence integer[] NOT NULL          -- answers routed for low confidence alone
);
CREATE INDEX ai_step_tallies_workflow_at ON conveyor.ai_step_tallies (workflow, at);

-- One label per AI answer a person decided: did the model's answer stand? approve = right,
-- correct = wrong (and which fields), reject = the input was bad. Keyed by the transition that
-- routed the item to review, so a decision taken back and taken again replaces its label.
CREATE TABLE conveyor.ai_labels (
    routed_id     bigint PRIMARY KEY,
    item_id       text NOT NULL,
    workflow      text NOT NULL,
    step          text NOT NULL,
    run_id        text NOT NULL,
    routed_at     timestamptz NOT NULL,
    outcome       text NOT NULL CHECK (outcome IN ('right', 'wrong', 'bad_input')),
    fields        text[] NOT NULL DEFAULT '{}',
    confidence    double precision,
    failed_checks text[] NOT NULL DEFAULT '{}',
    spot_check    boolean NOT NULL,
    share         double precision NOT NULL,   -- its sampling share: the spot check share; 1 when doubtful
    decided_by    text NOT NULL,
    decided_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ai_labels_workflow_routed ON conveyor.ai_labels (workflow, routed_at);
CREATE INDEX ai_labels_item ON conveyor.ai_labels (item_id);
