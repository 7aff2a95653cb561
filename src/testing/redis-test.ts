// Test support for the Redis KV pool: the server tests use (ARBOR_TEST_REDIS_URL) and whether it
// answers, so tests skip with the reason where no Redis runs.
import { Redis } from "ioredis";

/** The server tests use. */
export const REDIS_TEST_URL = process.env.ARBOR_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/** Why the test server cannot be used, or undefined when it answers PING. */
export async function redisUnreachable(url = REDIS_TEST_URL): Promise<string | undefined> {
  const client = new Redis(url, { lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on("error", () => undefined);
  try {
    await client.connect();
    await client.ping();
    return undefined;
  } catch (e) {
    return `Redis at ${url} is unreachable (${(e as Error).message || (e as Error).name}); set ARBOR_TEST_REDIS_URL`;
  } finally {
    client.disconnect();
  }
}
