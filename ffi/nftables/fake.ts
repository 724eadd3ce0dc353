/**
 * Temporary old path of the in-memory nftables, now
 * {@link MemoryNftables} in ./memory/client.ts. It stays while files that
 * other work has open still import it; new code imports the new path.
 *
 * @module
 */
export { MemoryNftables as FakeNftables } from "./memory/client.ts";
