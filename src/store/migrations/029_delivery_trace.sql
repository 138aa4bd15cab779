-- Schema version 29: the trace a delivery belongs to (issue 50, SPEC section 13).
--
-- deliveries.trace_parent: the W3C `traceparent` of the sender's `sessions_send` span, so the
-- target's turn joins the sender's trace on whichever instance runs it. NULL when traces were
-- off at the send, and for deliveries from before this version.
ALTER TABLE deliveries ADD COLUMN trace_parent TEXT;
