-- The AI step's shared state: the result cache and the circuit breaker of each model endpoint.

-- One model answer per (model, prompt version, input): a retried, cleared or re-run item whose
-- input and prompt did not change is answered from here and never sent (nor billed) twice.
CREATE TABLE conveyor.ai_results (
    model          text NOT NULL,               -- 'llm:openai:gpt-4o-mini@https://...' (endpoint + model)
    prompt_version text NOT NULL,               -- declared version + hash of the prompt text
    input_hash     text NOT NULL,               -- sha256 of the canonical model input
    output         jsonb NOT NULL,              -- the parsed, schema-valid answer
    confidence     double precision,
    detail         jsonb NOT NULL DEFAULT '{}'::jsonb,  -- confidence method, samples, calls spent
    item_id        text,                        -- the item that paid for it (for people, not a key)
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model, prompt_version, input_hash)
);

-- The circuit breaker of each model endpoint, shared by every worker of every DAG run.
CREATE TABLE conveyor.ai_breakers (
    endpoint         text PRIMARY KEY,
    state            text NOT NULL DEFAULT 'closed' CHECK (state IN ('closed', 'open', 'half_open')),
    failures         integer NOT NULL DEFAULT 0,   -- consecutive failed calls
    opened_at        timestamptz,                  -- when it last opened (the cool-down starts here)
    probe_owner      text,                         -- the worker whose call tests a half-open endpoint
    probe_started_at timestamptz,
    last_error       text,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
