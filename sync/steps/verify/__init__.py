"""Step 6, re-verify: oracle build, probe and identity, isolation, goldens, parity suites."""
