import { describe, expect, it } from "vitest";
import { memoryEscapeFilter } from "./seccomp.js";

/** Runs the filter on one system call, interpreting the four classic-BPF instructions it uses. */
function decide(filter: Buffer, arch: number, nr: number): "allow" | "ENOSYS" | string {
  let acc = 0;
  for (let pc = 0; pc < filter.length / 8; ) {
    const code = filter.readUInt16LE(pc * 8);
    const jt = filter.readUInt8(pc * 8 + 2);
    const jf = filter.readUInt8(pc * 8 + 3);
    const k = filter.readUInt32LE(pc * 8 + 4);
    if (code === 0x20) acc = k === 0 ? nr : k === 4 ? arch : NaN;
    else if (code === 0x15) pc += acc === k ? jt : jf;
    else if (code === 0x35) pc += acc >= k ? jt : jf;
    else if (code === 0x06) return k === 0x7fff0000 ? "allow" : k === 0x00050026 ? "ENOSYS" : `ret ${k.toString(16)}`;
    else return `bad opcode ${code}`;
    pc += 1;
  }
  return "fell off the end";
}

const X86_64 = 0xc000003e;
const I386 = 0x40000003;
const AARCH64 = 0xc00000b7;
const ARM = 0x40000028;

describe("memoryEscapeFilter", () => {
  it("refuses memfd_create, memfd_secret and System V shared memory on x86_64 and i386, and nothing else", () => {
    const f = memoryEscapeFilter("x64")!;
    for (const nr of [319, 29, 447, 0x40000000 + 319, 0x40000000]) expect(decide(f, X86_64, nr), `x86_64 ${nr}`).toBe("ENOSYS");
    for (const nr of [0, 1, 2, 9, 30, 31, 56, 59, 318, 320, 435]) expect(decide(f, X86_64, nr), `x86_64 ${nr}`).toBe("allow");
    for (const nr of [356, 395, 117, 447]) expect(decide(f, I386, nr), `i386 ${nr}`).toBe("ENOSYS");
    for (const nr of [1, 3, 4, 319, 29]) expect(decide(f, I386, nr), `i386 ${nr}`).toBe("allow");
    expect(decide(f, AARCH64, 279)).toBe("allow"); // not this host's ABI
  });

  it("does the same on aarch64 and arm, and has no table for other architectures", () => {
    const f = memoryEscapeFilter("arm64")!;
    for (const nr of [279, 194, 447]) expect(decide(f, AARCH64, nr)).toBe("ENOSYS");
    for (const nr of [63, 64, 220, 221, 195, 319]) expect(decide(f, AARCH64, nr)).toBe("allow");
    for (const nr of [385, 307, 447]) expect(decide(f, ARM, nr)).toBe("ENOSYS");
    expect(decide(f, ARM, 4)).toBe("allow");
    expect(memoryEscapeFilter("riscv64")).toBeUndefined();
  });
});
