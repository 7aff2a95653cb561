// The Sandbox interface: an isolated per-program workspace where tools run. Providers (bwrap now;
// docker and k8s later) implement it and pass one shared contract suite.

/** Limits applied to every process a sandbox runs. */
export interface SandboxLimits {
  /** CPU time per process, seconds (RLIMIT_CPU). */
  cpuSeconds: number;
  /** Address-space limit per process, MiB (RLIMIT_AS). */
  memoryMb: number;
  /** Wall-clock limit per exec, ms; the process group is killed past it. */
  wallMs: number;
}

export interface ExecOptions {
  /** Data written to the process's standard input. */
  stdin?: string;
  /** Working directory inside the sandbox (default: the workspace). */
  cwd?: string;
  env?: Record<string, string>;
  /** Overrides the sandbox's wall-clock limit for this exec. */
  wallMs?: number;
}

/**
 * Which sandbox limit stopped a command. The agent layer maps "memory" to the `sandbox_oom`
 * termination; the others are recorded as tool failures the agent may see. "arguments": argv and
 * environment were too big to start the command (it never ran; stderr names the limit).
 */
export type SandboxLimitKind = "memory" | "processes" | "disk" | "cpu" | "wall" | "arguments";

export interface ExecResult {
  exitCode: number | null;
  /** Signal that ended the process (e.g. SIGXCPU, SIGKILL), if any. */
  signal: string | null;
  stdout: string;
  stderr: string;
  /** True when the wall-clock limit killed it. */
  timedOut: boolean;
  durationMs: number;
  /**
   * The limit the command ran into, when one did (absent otherwise). When several were hit the
   * most specific wins: memory, processes, disk, cpu, then wall (a fork bomb usually also runs
   * out of wall time, but "processes" is what the agent did).
   */
  limit?: SandboxLimitKind;
}

/**
 * A host folder every sandbox of a provider sees read-only at a fixed path (an agent's install:
 * mounted, never copied into the workspace). bwrap binds it, docker mounts it as a read-only
 * volume, k8s as a read-only hostPath volume (the folder must exist on every node).
 */
export interface ReadOnlyMount {
  /** Absolute host path of the folder. */
  hostPath: string;
  /** Absolute path inside the sandbox (not under /workspace, /tmp, /proc or /dev). */
  sandboxPath: string;
}

/** One program's sandbox. */
export interface Sandbox {
  readonly programId: string;
  /** Host path of the workspace directory (visible inside as `/workspace`). */
  readonly hostWorkspace: string;
  /** Run a command (argv, no shell) inside the sandbox. */
  exec(argv: string[], opts?: ExecOptions): Promise<ExecResult>;
  /** Write a file into the workspace (path relative to the workspace). */
  writeFile(relPath: string, data: string | Uint8Array): Promise<void>;
  /** Kill every process and remove the workspace. Idempotent. */
  destroy(): Promise<void>;
}

export interface SandboxProvider {
  readonly name: string;
  create(programId: string): Promise<Sandbox>;
  /** Destroy every sandbox this provider still holds (called on shutdown and crash paths). */
  destroyAll(): Promise<void>;
}
