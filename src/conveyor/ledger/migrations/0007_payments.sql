-- The payments table stands for the ERP the invoice workflow pays through. One payment per
-- invoice, whatever clears or retries the task: both the item and the vendor's invoice number
-- are unique, and the idempotency key is what a real payment API would receive.
CREATE TABLE conveyor.payments (
    payment_id      bigserial PRIMARY KEY,
    item_id         text NOT NULL UNIQUE,
    vendor_id       text NOT NULL,
    invoice_number  text NOT NULL,
    amount          numeric(14, 2) NOT NULL CHECK (amount > 0),
    currency        text NOT NULL,
    idempotency_key text NOT NULL UNIQUE,
    run_id          text NOT NULL,
    paid_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (vendor_id, invoice_number)
);
