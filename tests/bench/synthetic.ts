/**
 * Moved to tests/support/synthetic.ts (shared by unit tests, e2e and benchmarks). This re-export
 * remains only for tests/e2e/sync_test.ts, which another helper had open during the move; delete
 * it once that file imports ../support/synthetic.ts.
 *
 * @module
 */
export * from "../support/synthetic.ts";
