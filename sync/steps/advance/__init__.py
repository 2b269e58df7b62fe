"""Step 7, advance: preconditions, the all-or-nothing transaction, pin copies."""
