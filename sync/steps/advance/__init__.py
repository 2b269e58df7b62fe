"""Step 7, advance: preconditions, the plan of every pin surface, rollback, pin copies, omni."""
