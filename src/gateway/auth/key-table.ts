// Per-program API keys: minted when the orchestrator creates a program, shown once, stored only as
// sha256 hashes. I/O-free apart from the random bytes, which are injectable for tests and simulation.
import { createHash, createHmac, randomBytes as cryptoRandomBytes, timingSafeEqual } from "node:crypto";
import { ArborError, CapacityError } from "../../core/errors.js";

/** Prefix of every program key, so a leaked one is recognisable in logs and secret scanners. */
export const PROGRAM_KEY_PREFIX = "arbor-pk-";

export interface KeyTableOptions {
  /** Programs with a live key at most; issuing one more is a CapacityError (default 1 << 20). */
  maxKeys?: number;
  /** Released programs whose key still reads their trace, oldest forgotten first (default maxKeys). */
  maxReleased?: number;
  /** Source of key material (default node:crypto randomBytes). */
  randomBytes?: (n: number) => Buffer;
  /**
   * Derive each program's key from this secret and the program's id (HMAC-SHA256) instead of drawing it: a
   * gateway restarted with the same secret can take its programs back with their keys ({@link restore}).
   */
  secret?: string;
}

/** sha256 of a secret, hex: what the table keeps instead of the key. */
export function hashSecret(secret: string): string {
  return createHash("sha256").update(secret, "utf8").digest("hex");
}

/** Constant-time comparison of two secrets (compared through their hashes, so lengths may differ). */
export function secretsEqual(a: string, b: string): boolean {
  return timingSafeEqual(createHash("sha256").update(a).digest(), createHash("sha256").update(b).digest());
}

/** Maps key hashes to program ids; never stores or returns a key after {@link ProgramKeyTable.issue}. */
export class ProgramKeyTable {
  private readonly maxKeys: number;
  private readonly maxReleased: number;
  private readonly randomBytes: (n: number) => Buffer;
  private readonly secret: string | undefined;
  private readonly programByHash = new Map<string, string>();
  private readonly hashByProgram = new Map<string, string>();
  // Insertion order = release order: the first entry is the oldest released program.
  private readonly released = new Set<string>();

  constructor(opts: KeyTableOptions = {}) {
    const maxKeys = opts.maxKeys ?? 1 << 20;
    const maxReleased = opts.maxReleased ?? maxKeys;
    if (!(Number.isInteger(maxKeys) && maxKeys >= 1)) {
      throw new ArborError(`maxKeys: must be an integer >= 1, got ${maxKeys}`, "config");
    }
    if (!(Number.isInteger(maxReleased) && maxReleased >= 0)) {
      throw new ArborError(`maxReleased: must be an integer >= 0, got ${maxReleased}`, "config");
    }
    this.maxKeys = maxKeys;
    this.maxReleased = maxReleased;
    this.randomBytes = opts.randomBytes ?? cryptoRandomBytes;
    this.secret = opts.secret;
  }

  /** Programs holding a key (live or released-but-remembered). */
  get size(): number {
    return this.hashByProgram.size;
  }

  /**
   * Mint a key for a new program and return it — the only time it is ever visible.
   * Throws `program_exists` if the program already has one, `capacity` at the limit.
   */
  issue(programId: string): string {
    if (this.hashByProgram.has(programId)) {
      throw new ArborError(`program '${programId}' already has an API key; create programs once`, "program_exists");
    }
    if (this.hashByProgram.size - this.released.size >= this.maxKeys) throw new CapacityError("program key table", this.maxKeys);
    const bytes = this.secret !== undefined ? derivedKeyBytes(this.secret, programId) : this.randomBytes(32);
    if (bytes.length !== 32) throw new ArborError(`randomBytes: must return 32 bytes, got ${bytes.length}`, "config");
    const key = PROGRAM_KEY_PREFIX + bytes.toString("base64url");
    const hash = hashSecret(key);
    if (this.programByHash.has(hash)) throw new ArborError("randomBytes: produced a key already in use", "config");
    this.programByHash.set(hash, programId);
    this.hashByProgram.set(programId, hash);
    return key;
  }

  /**
   * Take back the key of a program created before this gateway (re)started: its key is derived again from the
   * secret, so the program's client keeps using the key it was given. Needs `secret`; idempotent.
   */
  restore(programId: string): void {
    if (this.secret === undefined) throw new ArborError("program keys: restoring needs the key secret the keys were derived from", "config");
    if (this.hashByProgram.has(programId)) return;
    if (this.hashByProgram.size - this.released.size >= this.maxKeys) throw new CapacityError("program key table", this.maxKeys);
    const hash = hashSecret(PROGRAM_KEY_PREFIX + derivedKeyBytes(this.secret, programId).toString("base64url"));
    this.programByHash.set(hash, programId);
    this.hashByProgram.set(programId, hash);
  }

  /** The program a key belongs to, or undefined for an unknown key. */
  programOf(key: string): string | undefined {
    return this.programByHash.get(hashSecret(key));
  }

  /** Whether the program was created with a key (its calls then always need it). */
  hasKey(programId: string): boolean {
    return this.hashByProgram.has(programId);
  }

  /**
   * The program ended: its key keeps reading the trace until `maxReleased` later releases push it
   * out. Idempotent; unknown ids are ignored (programs opened on first call have no key).
   */
  release(programId: string): void {
    if (!this.hashByProgram.has(programId) || this.released.has(programId)) return;
    this.released.add(programId);
    while (this.released.size > this.maxReleased) {
      const oldest = this.released.values().next().value as string;
      this.forget(oldest);
    }
  }

  private forget(programId: string): void {
    const hash = this.hashByProgram.get(programId);
    if (hash !== undefined) this.programByHash.delete(hash);
    this.hashByProgram.delete(programId);
    this.released.delete(programId);
  }
}

/** A program's key material derived from the gateway's secret (HMAC-SHA256 of the program id). */
function derivedKeyBytes(secret: string, programId: string): Buffer {
  return createHmac("sha256", secret).update(`arbor-program-key:${programId}`, "utf8").digest();
}
