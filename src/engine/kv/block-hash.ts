// Chained block hashes and block identities for the KV prefix cache (vLLM v1's hash_block_tokens).
// The hash is only an index: a cached block is reused after its identity (tokens of the whole
// prefix, checked through the parent chain) is verified, so even a weak hash never yields wrong KV.

/** A block's chained hash: 16 hex digits (two 32-bit lanes). */
export type KvBlockHash = string;

/** hash(parentHash, the block's token ids, optional extra keys such as a cache salt). */
export type KvHashFn = (
  parent: KvBlockHash | null,
  tokenIds: readonly number[],
  extraKeys?: readonly (string | number)[],
) => KvBlockHash;

/**
 * What a cached block holds, independent of where it lives (L1 block, L2/L3 entry). Identities are
 * immutable and shared between tiers and managers; `parent` links to the previous block of the
 * prefix, so two identities are equal iff their whole prefixes hold the same tokens.
 */
export interface KvBlockIdentity {
  readonly hash: KvBlockHash;
  /** hashKey(hash): what the prefix-cache maps index the block by. */
  readonly key: number;
  /** The block's tokens packed in a string (packTokens): what identity checks compare. */
  readonly packed: string;
  /** The block's tokens, unpacked anew (a frozen copy) at every read: for inspection, not for hot paths. */
  readonly tokenIds: readonly number[];
  readonly parent: KvBlockIdentity | null;
  /** Block index in the prefix (0 for the first block; -1 for a cache salt's root). */
  readonly depth: number;
  /** A block manager's cache beside the identity (TIER_HIT), not part of what the block holds. */
  [TIER_HIT]?: unknown;
  /** An in-process tier's cache beside the identity (TIER_SLOT), not part of what the block holds. */
  [TIER_SLOT]?: number;
}

/**
 * The key of a block manager's last hit on an identity in a tier (block-manager.ts tierHitAt), reused while
 * it names the same tier. A symbol, so serializing or cloning an identity never follows it (the hit holds
 * its tier, whose entries hold identities).
 */
export const TIER_HIT: unique symbol = Symbol("kv tier hit");

/**
 * The slot an in-process tier (tier.ts) last stored the identity in (-1: none yet): a hint the tier checks against
 * its own slot, so "does the tier hold this block" is one load instead of a search of an index of millions.
 */
export const TIER_SLOT: unique symbol = Symbol("kv tier slot");

/**
 * An identity keeps its tokens packed: a full-scale simulation holds millions of identities (every L1 block
 * and every L3 entry). 16 tokens take 48 bytes as a string of 16 UTF-16 units (88 with ids above 65,533, two
 * units each) where a frozen array of them took 176, half of the simulation's live heap. Two identities'
 * tokens compare as two short strings.
 */
class BlockIdentity implements KvBlockIdentity {
  declare [TIER_HIT]: unknown;
  declare [TIER_SLOT]: number;

  constructor(
    readonly hash: KvBlockHash,
    readonly key: number,
    readonly packed: string,
    readonly parent: KvBlockIdentity | null,
    readonly depth: number,
  ) {
    this[TIER_HIT] = undefined;
    this[TIER_SLOT] = -1;
  }

  get tokenIds(): readonly number[] {
    return Object.freeze(unpackTokens(this.packed));
  }
}

/** Creates an identity of `tokenIds` (packed: a copy); `parent` null means the block starts a prompt. */
export function makeIdentity(
  hash: KvBlockHash,
  tokenIds: readonly number[],
  parent: KvBlockIdentity | null,
  /** hashKey(hash), when the caller has it. */
  key: number = hashKey(hash),
): KvBlockIdentity {
  return makeIdentityAt(hash, tokenIds, 0, tokenIds.length, parent, key);
}

/** makeIdentity of the block `tokenIds[offset .. offset + len)`, without slicing it out. */
export function makeIdentityAt(
  hash: KvBlockHash,
  tokenIds: ArrayLike<number>,
  offset: number,
  len: number,
  parent: KvBlockIdentity | null,
  key: number = hashKey(hash),
  /** parent.depth + 1 (0 without a parent), when the caller knows it without reading the parent. */
  depth: number = parent === null ? 0 : parent.depth + 1,
): KvBlockIdentity {
  return new BlockIdentity(hash, key, packTokens(tokenIds, offset, len), parent, depth);
}

/** The root "block" of a cache salt (depth -1): its tokens stand for the salt, so identity checks compare salts. */
export function makeRootIdentity(hash: KvBlockHash, tokenIds: readonly number[]): KvBlockIdentity {
  return new BlockIdentity(hash, hashKey(hash), packTokens(tokenIds, 0, tokenIds.length), null, -1);
}

/**
 * `tokenIds[start .. end)` as an array, whether the tokens are an array or a typed array (a scheduler's buffer).
 * A loop: Array.prototype.slice on a typed array takes V8's generic path, ten times slower (a finished request's
 * output is thousands of tokens).
 */
export function sliceTokens(tokenIds: ArrayLike<number>, start: number, end: number): number[] {
  const out = new Array<number>(Math.max(0, end - start));
  for (let i = start; i < end; i++) out[i - start] = tokenIds[i] as number;
  return out;
}

/** First unit of the wide form: every token as two units (high, low 16 bits). */
const WIDE = 0xffff;
/** First unit of the text form: the tokens' JSON (a token that is not an integer in [0, 2^32)). */
const TEXT = 0xfffe;
/** Scratch for the units of one block's packing, per length (a block is usually 16 tokens: 16 or 33 units). */
const scratch = new Map<number, number[]>();

function unitsOf(n: number): number[] {
  let u = scratch.get(n);
  if (u === undefined) {
    u = new Array<number>(n).fill(0);
    if (scratch.size < 64) scratch.set(n, u);
  }
  return u;
}

/**
 * Packs `tokenIds[offset .. offset + len)` in a string, one form per token list (so two lists are equal iff
 * their packings are): narrow, a unit per token, when every token is an integer in [0, 0xfffd] (every
 * vocabulary up to 65,534 tokens); else wide, WIDE then two units per token, when every token is an integer in
 * [0, 2^32); else TEXT then their JSON.
 */
export function packTokens(tokenIds: ArrayLike<number>, offset: number, len: number): string {
  let i = 0;
  while (i < len) {
    const t = tokenIds[offset + i] as number;
    if (!(t >= 0 && t <= 0xfffd && (t | 0) === t)) break;
    i++;
  }
  if (i === len) {
    const u = unitsOf(len);
    for (let j = 0; j < len; j++) u[j] = tokenIds[offset + j] as number;
    return String.fromCharCode.apply(null, u);
  }
  // Wide, in the same pass that checks the rest (a large vocabulary's blocks nearly all pack wide): the tokens
  // before `i` are narrow, so integers in range.
  const u = unitsOf(1 + 2 * len);
  u[0] = WIDE;
  for (let j = 0; j < len; j++) {
    const t = tokenIds[offset + j] as number;
    if (j >= i && !(t >= 0 && t < 0x100000000 && Math.floor(t) === t)) return String.fromCharCode(TEXT) + JSON.stringify(sliceTokens(tokenIds, offset, offset + len));
    // An integer in [0, 2^32): its high and low 16 bits.
    u[1 + 2 * j] = t >>> 16;
    u[2 + 2 * j] = t & 0xffff;
  }
  return String.fromCharCode.apply(null, u);
}

/** The tokens a packTokens string holds. */
export function unpackTokens(packed: string): number[] {
  const first = packed.charCodeAt(0);
  if (first === TEXT) return JSON.parse(packed.slice(1)) as number[];
  const out: number[] = [];
  if (first === WIDE) for (let i = 1; i + 1 < packed.length; i += 2) out.push(packed.charCodeAt(i) * 0x10000 + packed.charCodeAt(i + 1));
  else for (let i = 0; i < packed.length; i++) out.push(packed.charCodeAt(i));
  return out;
}

/**
 * A hash's small-integer key (FNV-1a over its characters, 30 bits, so always a V8 small integer and never
 * negative): what the prefix-cache index of L1 and of the tiers (KeyChains) is keyed by. An integer key is
 * compared without reading a string, which in an index of millions of blocks (a full-scale simulation) saves
 * cache misses on every lookup. Distinct hashes may share a key, so the index chains the blocks under a key and
 * every lookup compares their hashes.
 */
export function hashKey(hash: KvBlockHash): number {
  return fnv1a(hash) & 0x3fffffff;
}

/** 32-bit FNV-1a over a string's UTF-16 units. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h;
}

function murmurMix(h: number, k: number): number {
  let x = Math.imul(k, 0xcc9e2d51);
  x = (x << 15) | (x >>> 17);
  x = Math.imul(x, 0x1b873593);
  let y = h ^ x;
  y = (y << 13) | (y >>> 19);
  return (Math.imul(y, 5) + 0xe6546b64) | 0;
}

function finalMix(h: number): number {
  let x = h ^ (h >>> 16);
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

/** Lower-case hex digits' char codes. */
const HEX = Array.from("0123456789abcdef", (c) => c.charCodeAt(0));
const laneCodes = new Array<number>(16);

/**
 * Two 32-bit lanes as 16 hex digits in one flat string: a concatenation of two 8-digit ones would be a
 * rope of three strings, and a simulation keeps a hash for every block of every request and every tier
 * entry (millions at full scale).
 */
function hex16(a: number, b: number): string {
  for (let i = 7; i >= 0; i--) {
    laneCodes[i] = HEX[a & 15] as number;
    laneCodes[8 + i] = HEX[b & 15] as number;
    a >>>= 4;
    b >>>= 4;
  }
  return String.fromCharCode.apply(null, laneCodes);
}

function parseLane(hash: KvBlockHash, start: number): number {
  // Eight hex digits (every hash made here): read in place, without a substring per block hashed.
  if (hash.length >= start + 8) {
    let v = 0;
    for (let i = start; i < start + 8; i++) {
      const d = hexDigit(hash.charCodeAt(i));
      if (d < 0) return parseLaneText(hash, start);
      v = v * 16 + d;
    }
    return v;
  }
  return parseLaneText(hash, start);
}

/** parseLane of any other hash (a hash function's own, a salt's): as parseInt reads it, 0 for none. */
function parseLaneText(hash: KvBlockHash, start: number): number {
  const v = Number.parseInt(hash.slice(start, start + 8), 16);
  return Number.isNaN(v) ? 0 : v;
}

/** The value of a hex digit's UTF-16 unit, -1 for any other unit. */
function hexDigit(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}

function extraKeyWord(key: string | number): number {
  if (typeof key === "number") return Number.isInteger(key) ? key | 0 : Math.round(key * 1e6) | 0;
  // Extra keys are short strings (salts, adapter names).
  return fnv1a(key);
}

/**
 * Default chained block hash: a murmur3-style lane and an FNV-1a-style lane, each seeded by the
 * parent's lane, mixed over every token id (and extra key), giving a 64-bit key. Deterministic
 * across processes, so engines sharing an L3 pool agree on keys.
 */
export function hashBlockTokens(
  parent: KvBlockHash | null,
  tokenIds: readonly number[],
  extraKeys?: readonly (string | number)[],
): KvBlockHash {
  return hashBlockTokensAt(parent, tokenIds, 0, tokenIds.length, extraKeys);
}

/** hashBlockTokens of the block `tokenIds[offset .. offset + len)`, without slicing it out. */
export function hashBlockTokensAt(
  parent: KvBlockHash | null,
  tokenIds: ArrayLike<number>,
  offset: number,
  len: number,
  extraKeys?: readonly (string | number)[],
): KvBlockHash {
  return hashAfterLanes(parent === null ? 0 : parseLane(parent, 0), parent === null ? 0 : parseLane(parent, 8), tokenIds, offset, len, extraKeys);
}

/** The two lanes of the hash hashAfterLanes made last (what a chain keeps to hash the next block without parsing). */
let lastLaneA = 0;
let lastLaneB = 0;

/** hashBlockTokensAt from its parent's two lanes (0 and 0 for no parent), each seeded here. */
function hashAfterLanes(parentA: number, parentB: number, tokenIds: ArrayLike<number>, offset: number, len: number, extraKeys?: readonly (string | number)[]): KvBlockHash {
  // Each word goes into both lanes (murmurMix, fnvWord): small functions the compiler inlines, where a closure
  // over both lanes was left a call per token once token buffers became typed arrays.
  let a = parentA ^ 0x9747b28c;
  let b = parentB ^ 0x811c9dc5;
  for (let i = offset; i < offset + len; i++) {
    const t = tokenIds[i] as number;
    a = murmurMix(a, t | 0);
    b = fnvWord(b, t | 0);
    // Token ids above 2^32 would alias in the 32-bit word; fold the high part in too.
    if (t > 0xffffffff || t < 0) {
      const high = Math.floor(t / 0x100000000) | 0;
      a = murmurMix(a, high);
      b = fnvWord(b, high);
    }
  }
  if (extraKeys !== undefined) {
    for (const k of extraKeys) {
      const w = extraKeyWord(k);
      a = murmurMix(a, w);
      b = fnvWord(b, w);
    }
  }
  a = murmurMix(a, len);
  b = fnvWord(b, len);
  lastLaneA = finalMix(a ^ len);
  lastLaneB = finalMix(b);
  return hex16(lastLaneA, lastLaneB);
}

/** The FNV-1a-style lane after the word `w`, fed as its low and high 16 bits' worth. */
function fnvWord(b: number, w: number): number {
  return Math.imul(Math.imul(b ^ w, 0x01000193) ^ (w >>> 16), 0x01000193);
}

/**
 * Whether a packed block (packTokens) holds `tokenIds[offset .. offset + len)`, compared in place (lookups
 * run every step); a window past the end holds nothing.
 */
export function samePackedAt(packed: string, tokenIds: ArrayLike<number>, offset: number, len: number): boolean {
  if (offset + len > tokenIds.length) return false;
  const first = packed.charCodeAt(0);
  if (packed.length === len && (len === 0 || first < TEXT)) {
    for (let i = 0; i < len; i++) if (packed.charCodeAt(i) !== tokenIds[offset + i]) return false;
    return true;
  }
  // Wide (a vocabulary over 65,534 tokens: nearly every block holds an id above it). A window of narrow
  // tokens never packs wide, so a wide block equal to it in value cannot be.
  if (first === WIDE && packed.length === 1 + 2 * len) {
    let narrow = true;
    for (let i = 0; i < len; i++) {
      const t = tokenIds[offset + i] as number;
      if (packed.charCodeAt(1 + 2 * i) * 0x10000 + packed.charCodeAt(2 + 2 * i) !== t) return false;
      if (t > 0xfffd) narrow = false;
    }
    return !narrow;
  }
  // The text form, or another length: one packing per token list, so comparing packings is exact.
  return first === TEXT && packed === packTokens(tokenIds, offset, len);
}

/**
 * One request's chained block hashes, extended as its tokens grow (vLLM's `Request.block_hashes`): a prefix
 * lookup repeated at every step while the request waits for KV hashes nothing again. It also keeps the cached
 * identities proven to hold the request's prefix (PrefixProofs), so a repeated lookup accepts them again
 * without comparing tokens (identities are immutable, so a proof stays true). Valid for one token array that
 * only grows by appending; a different root (cache salt) or hash function starts the chain over.
 */
export class BlockHashChain implements PrefixProofs {
  private root: KvBlockIdentity | null | undefined = undefined;
  private hashFn: KvHashFn | undefined;
  private hashes: KvBlockHash[] = [];
  /**
   * Three numbers per hashed block `i`: at 3i its key, hashKey(hashes[i]) (every prefix-cache index is keyed
   * by it, at every lookup of the block), then, with the default hash (hashBlockTokens), the two lanes (int32)
   * after its hash, from which the next block's hash starts instead of parsing its parent's hex digits (0 and 0
   * with another hash function). One array, not two: hashing a request's next block is a cache miss on each
   * array it reads or grows, and at scale every request's chain is cold by its next block.
   */
  private words: number[] = [];
  /**
   * What a block manager keys this request's lookup memo by. A continuation that shares every block this
   * chain hashed takes it over (continuedBy), so its first lookup replays the hits of the request it
   * continues; this chain gets a new one (its memo could now outgrow its tokens).
   */
  lineage: object = {};
  /** The tokens last hashed, and their block size (what continuedBy compares a continuation against). */
  private source: ArrayLike<number> | undefined;
  private blockSize = 0;
  known: (KvBlockIdentity | undefined)[] = [];
  readonly knownAlso = new Set<KvBlockIdentity>();

  /** The hash of full block `i` of `tokenIds` (blocks of `blockSize`) under `root`. */
  hashOf(tokenIds: ArrayLike<number>, i: number, blockSize: number, root: KvBlockIdentity | null, hashFn: KvHashFn): KvBlockHash {
    this.useRoot(root, hashFn);
    if ((i + 1) * blockSize > tokenIds.length) throw new Error(`block hash chain: block ${i} is not full (${tokenIds.length} tokens)`);
    this.source = tokenIds;
    this.blockSize = blockSize;
    for (let j = this.hashes.length; j <= i; j++) {
      let hash: KvBlockHash;
      if (hashFn === hashBlockTokens) {
        // The default hash reads the block in place (no array per block hashed), and from the previous block's lanes.
        hash =
          j === 0
            ? hashBlockTokensAt(root === null ? null : root.hash, tokenIds, 0, blockSize)
            : hashAfterLanes(this.words[3 * j - 2] as number, this.words[3 * j - 1] as number, tokenIds, j * blockSize, blockSize);
        this.words.push(hashKey(hash), lastLaneA | 0, lastLaneB | 0);
      } else {
        const parent = j === 0 ? (root === null ? null : root.hash) : (this.hashes[j - 1] as KvBlockHash);
        hash = hashFn(parent, sliceTokens(tokenIds, j * blockSize, (j + 1) * blockSize));
        this.words.push(hashKey(hash), 0, 0);
      }
      this.hashes.push(hash);
    }
    return this.hashes[i] as KvBlockHash;
  }

  /** hashKey of block `i`'s hash, computed once when the block was hashed (call hashOf for `i` first). */
  keyAt(i: number): number {
    const key = this.words[3 * i];
    if (key === undefined) throw new Error(`block hash chain: block ${i} is not hashed yet`);
    return key;
  }

  /**
   * A new chain for `tokenIds`, a request that continues this chain's one (its prompt is that request's
   * tokens, and more): it starts with the hashes and proofs of the full blocks both share, so a long
   * context is neither hashed nor compared again. Checks the shared tokens (one pass, no hashing, none when
   * `tokenIds` is a view of the very buffer this chain hashed); a chain that hashed nothing, or whose tokens
   * `tokenIds` does not start with, gives what they have in common. When the continuation shares every block
   * this chain hashed, it takes them over and this chain is left as a new one (a continued request's chain is
   * not used again; a context of tens of thousands of tokens is not copied per continuation).
   */
  continuedBy(tokenIds: ArrayLike<number>): BlockHashChain {
    const next = new BlockHashChain();
    const source = this.source;
    const bs = this.blockSize;
    if (source === undefined || this.root === undefined || this.hashFn === undefined || bs === 0) return next;
    let blocks = Math.min(this.hashes.length, Math.floor(tokenIds.length / bs));
    const same = Math.min(blocks * bs, source.length);
    // A request's tokens are only appended to: a view of the same buffer from the same start holds the same ones.
    const sameBuffer = source instanceof Uint32Array && tokenIds instanceof Uint32Array && source.buffer === tokenIds.buffer && source.byteOffset === tokenIds.byteOffset;
    for (let t = 0; !sameBuffer && t < same; t++) {
      if (source[t] !== tokenIds[t]) {
        blocks = Math.floor(t / bs);
        break;
      }
    }
    next.root = this.root;
    next.hashFn = this.hashFn;
    next.source = tokenIds;
    next.blockSize = bs;
    for (const x of this.knownAlso) if (x.depth < blocks) next.knownAlso.add(x);
    if (blocks === this.hashes.length) {
      next.hashes = this.hashes;
      next.words = this.words;
      next.known = this.known;
      next.lineage = this.lineage;
      this.hashes = [];
      this.words = [];
      this.known = [];
      this.knownAlso.clear();
      this.lineage = {};
      this.source = undefined;
      return next;
    }
    for (let d = 0; d < blocks; d++) {
      next.hashes.push(this.hashes[d] as KvBlockHash);
      next.words.push(this.words[3 * d] as number, this.words[3 * d + 1] as number, this.words[3 * d + 2] as number);
      next.known.push(this.known[d]);
    }
    return next;
  }

  /** The hash of block `i` when hashed already, else undefined (no hashing). */
  hashAt(i: number): KvBlockHash | undefined {
    return this.hashes[i];
  }

  /** Starts the chain over (hashes and proven identities) when the root or the hash function changes. */
  useRoot(root: KvBlockIdentity | null, hashFn: KvHashFn): void {
    if (root !== this.root || hashFn !== this.hashFn) {
      this.root = root;
      this.hashFn = hashFn;
      this.hashes.length = 0;
      this.words.length = 0;
      this.known.length = 0;
      this.knownAlso.clear();
      this.lineage = {};
    }
  }
}

/**
 * Identities proven equal to one request's prefix (each at its own depth), kept across lookups of that
 * request. Several content-equal identities can exist for one block (an L1 block's and its L2/L3 copy's),
 * so proofs are never overwritten: the first per depth in `known` (the fast path), any other in `knownAlso`.
 */
export interface PrefixProofs {
  /** known[d]: the first identity proven equal to blocks 0..d. */
  readonly known: (KvBlockIdentity | undefined)[];
  readonly knownAlso: Set<KvBlockIdentity>;
}

/**
 * Pairs of distinct identities proven to hold the same prefix: identities are immutable, so a proof stands
 * for as long as both live (weak keys). Engines that computed the same prompt each have their own identity
 * objects, and each eviction checks whether the shared L3 tier already holds the block: without proofs,
 * every check walks both chains to the root, and a finished request's blocks are evicted deepest first, so
 * a context of n blocks cost n²/2 comparisons. With them, a walk stops at the first pair proven before.
 */
const provenSame = new WeakMap<KvBlockIdentity, KvBlockIdentity>();

/** True when two identities describe the same prefix (same tokens in every block). */
export function sameIdentity(a: KvBlockIdentity | null, b: KvBlockIdentity | null): boolean {
  let x = a;
  let y = b;
  while (x !== y) {
    if (x === null || y === null) return false;
    if (provenSame.get(x) === y) break;
    if (x.depth !== y.depth || x.packed !== y.packed) return false;
    x = x.parent;
    y = y.parent;
  }
  // Every pair walked is proven now (one proof per identity, the latest: the next check is usually a
  // pair walked here, the parents of the pair just checked).
  for (let p = a, q = b; p !== x && p !== null && q !== null; p = p.parent, q = q.parent) {
    provenSame.set(p, q);
    provenSame.set(q, p);
  }
  return true;
}

/**
 * Verifies, block by block, that cached identities continue one request's prefix. It remembers
 * every identity already proven equal to the request's prefix, so a lookup costs O(prefix) even
 * when the chain mixes identities created by different managers. Given the request's proofs (its
 * `BlockHashChain`), it also reuses (and extends) the proofs of earlier lookups of the same request:
 * an identity proven before is accepted again in O(1).
 */
export class PrefixVerifier {
  private readonly verified = new Set<KvBlockIdentity>();

  constructor(private readonly proofs?: PrefixProofs) {}

  /**
   * Accepts `candidate` as the request's block after `prev` (the identity matched for the previous
   * block, null at depth 0) when its tokens equal `blockTokens` and its parent chain equals prev's.
   */
  accept(candidate: KvBlockIdentity, blockTokens: readonly number[], prev: KvBlockIdentity | null): boolean {
    return this.acceptAt(candidate, blockTokens, 0, blockTokens.length, prev);
  }

  /**
   * `accept` for the block `tokenIds[offset .. offset + len)`, without slicing it out. With proofs,
   * `tokenIds` must be the tokens they were built for (and `prev` a block this verifier or they accepted).
   */
  acceptAt(candidate: KvBlockIdentity, tokenIds: ArrayLike<number>, offset: number, len: number, prev: KvBlockIdentity | null): boolean {
    const depth = prev === null ? 0 : prev.depth + 1;
    if (candidate.depth !== depth) return false;
    // Proven equal to this request's prefix by an earlier lookup: prev holds the same prefix.
    if (this.isKnown(candidate)) return true;
    if (!samePackedAt(candidate.packed, tokenIds, offset, len)) return false;
    if (!this.parentMatches(candidate.parent, prev)) return false;
    this.verified.add(candidate);
    this.remember(candidate);
    return true;
  }

  private isKnown(x: KvBlockIdentity): boolean {
    const p = this.proofs;
    return p !== undefined && x.depth >= 0 && (p.known[x.depth] === x || (p.knownAlso.size > 0 && p.knownAlso.has(x)));
  }

  /** Records a proof without replacing an earlier one (two content-equal identities would evict each other). */
  private remember(x: KvBlockIdentity): void {
    const p = this.proofs;
    if (p === undefined || x.depth < 0) return;
    const first = p.known[x.depth];
    if (first === undefined) p.known[x.depth] = x;
    else if (first !== x) p.knownAlso.add(x);
  }

  private parentMatches(parent: KvBlockIdentity | null, prev: KvBlockIdentity | null): boolean {
    const walked: KvBlockIdentity[] = [];
    let x = parent;
    let y = prev;
    for (;;) {
      if (x === y || (x !== null && (this.verified.has(x) || this.isKnown(x)))) break;
      if (x === null || y === null) return false;
      if (x.depth !== y.depth || x.packed !== y.packed) return false;
      walked.push(x);
      x = x.parent;
      y = y.parent;
    }
    for (const w of walked) {
      this.verified.add(w);
      this.remember(w);
    }
    return true;
  }
}
