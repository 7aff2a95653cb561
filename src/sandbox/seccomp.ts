// A seccomp filter (classic BPF, as bwrap's `--seccomp FD` loads it) that refuses the system calls
// creating memory no mount caps: memfd_create (an anonymous file; written through its fd it is not
// even in the writer's address space, so RLIMIT_AS does not see it), memfd_secret, and System V
// shared memory (segments outlive the process that filled them until the IPC namespace ends).
// Without a cgroup, each of them let one command take host memory past every sandbox limit. The
// calls fail with ENOSYS, which programs already handle as "not on this kernel".

interface ArchRule {
  /** AUDIT_ARCH_* value in seccomp_data.arch. */
  arch: number;
  /** System call numbers refused for that ABI. */
  refused: number[];
  /** Refuse every number at or above this too (x86_64's x32 ABI, which nothing here uses). */
  refusedFrom?: number;
}

const MEMFD_SECRET = 447; // the same number on every architecture (added after the tables were unified)

/** Per host architecture (Node's process.arch): its native ABI and its 32-bit compatibility ABI. */
const RULES: Record<string, ArchRule[]> = {
  x64: [
    { arch: 0xc000003e, refused: [319, 29, MEMFD_SECRET], refusedFrom: 0x40000000 }, // x86_64: memfd_create, shmget
    { arch: 0x40000003, refused: [356, 395, 117, MEMFD_SECRET] }, // i386: memfd_create, shmget, ipc (multiplexer)
  ],
  arm64: [
    { arch: 0xc00000b7, refused: [279, 194, MEMFD_SECRET] }, // aarch64: memfd_create, shmget
    { arch: 0x40000028, refused: [385, 307, MEMFD_SECRET] }, // arm (EABI): memfd_create, shmget
  ],
};

const LD_W_ABS = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const RET_K = 0x06; // BPF_RET | BPF_K
const RET_ALLOW = 0x7fff0000; // SECCOMP_RET_ALLOW
const RET_ENOSYS = 0x00050000 | 38; // SECCOMP_RET_ERRNO | ENOSYS
const NR_OFFSET = 0; // seccomp_data.nr
const ARCH_OFFSET = 4; // seccomp_data.arch

type Target = number | "deny" | "next";
interface Insn {
  code: number;
  k: number;
  jt?: Target;
  jf?: Target;
}

/**
 * The filter's bytes (struct sock_filter[], little-endian) for host architecture `arch`, or
 * undefined where Arbor has no system call table for it (the sandbox then runs without it).
 */
export function memoryEscapeFilter(arch: string = process.arch): Buffer | undefined {
  const rules = RULES[arch];
  if (!rules) return undefined;
  // One block per ABI; a block is entered only when seccomp_data.arch matches (the accumulator
  // still holds the arch when a block's first jump skips to the next one).
  const blocks: Insn[][] = rules.map((r) => [
    { code: JEQ_K, k: r.arch, jt: 0, jf: "next" },
    { code: LD_W_ABS, k: NR_OFFSET },
    ...(r.refusedFrom !== undefined ? [{ code: JGE_K, k: r.refusedFrom, jt: "deny" as const, jf: 0 }] : []),
    ...r.refused.map((nr) => ({ code: JEQ_K, k: nr, jt: "deny" as const, jf: 0 })),
    { code: RET_K, k: RET_ALLOW },
  ]);
  // Layout: load the arch, the blocks, "allow" for any other ABI, then "deny".
  const starts: number[] = [];
  let at = 1;
  for (const b of blocks) {
    starts.push(at);
    at += b.length;
  }
  const deny = at + 1;
  const prog: { ins: Insn; next: number }[] = [{ ins: { code: LD_W_ABS, k: ARCH_OFFSET }, next: at }];
  blocks.forEach((b, j) => {
    for (const ins of b) prog.push({ ins, next: starts[j + 1] ?? at });
  });
  prog.push({ ins: { code: RET_K, k: RET_ALLOW }, next: at });
  prog.push({ ins: { code: RET_K, k: RET_ENOSYS }, next: at });

  const out = Buffer.alloc(prog.length * 8);
  prog.forEach(({ ins, next }, i) => {
    // Jump offsets count from the instruction after this one.
    const offset = (t: Target | undefined): number => {
      if (t === undefined || typeof t === "number") return t ?? 0;
      const off = (t === "deny" ? deny : next) - (i + 1);
      if (off < 0 || off > 255) throw new Error(`seccomp: jump out of range (${off})`);
      return off;
    };
    out.writeUInt16LE(ins.code, i * 8);
    out.writeUInt8(offset(ins.jt), i * 8 + 2);
    out.writeUInt8(offset(ins.jf), i * 8 + 3);
    out.writeUInt32LE(ins.k >>> 0, i * 8 + 4);
  });
  return out;
}
