// Pure request builders for the k8s provider: the pod (read-only rootfs, non-root, no service
// account token, size-limited emptyDir workspace and /tmp, CPU/memory/ephemeral-storage limits),
// the deny-all NetworkPolicy that cuts its network, and the exec command lines.
import type { V1NetworkPolicy, V1Pod, V1Status } from "@kubernetes/client-node";
import { SANDBOX_WORKSPACE } from "./bwrap-args.js";
import { BASE_ENV, KILL_TREE, RECORD_PID } from "./docker-spec.js";
import type { ReadOnlyMount } from "./sandbox.js";

export const SANDBOX_CONTAINER = "sandbox";

export interface K8sPodSpec {
  name: string;
  programId: string;
  image: string;
  uid: number;
  cpus: number;
  memoryMb: number;
  workspaceMb: number;
  tmpSizeMb: number;
  /**
   * Node folders mounted read-only in the pod (hostPath volumes, type Directory: the folder must
   * exist on every node that runs sandboxes, e.g. an agent's install put there by a DaemonSet).
   */
  readOnlyMounts?: readonly ReadOnlyMount[];
}

/** Label values allow [A-Za-z0-9_.-], at most 63 characters, alphanumeric at both ends. */
export function labelValue(s: string): string {
  return s.replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 63).replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, "") || "program";
}

/** The pod of one program's sandbox. */
export function podSpec(s: K8sPodSpec): V1Pod {
  const mounts = s.readOnlyMounts ?? [];
  const limits = { cpu: String(s.cpus), memory: `${s.memoryMb}Mi`, "ephemeral-storage": `${s.workspaceMb + s.tmpSizeMb}Mi` };
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: s.name, labels: { "arbor.sandbox": "1", "arbor.pod": s.name, "arbor.program": labelValue(s.programId) } },
    spec: {
      restartPolicy: "Never",
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 0,
      hostname: "arbor-sandbox",
      securityContext: { runAsUser: s.uid, runAsGroup: s.uid, runAsNonRoot: true, fsGroup: s.uid },
      containers: [
        {
          name: SANDBOX_CONTAINER,
          image: s.image,
          command: ["sleep", "infinity"],
          workingDir: SANDBOX_WORKSPACE,
          env: Object.entries(BASE_ENV).map(([name, value]) => ({ name, value })),
          resources: { limits, requests: limits },
          securityContext: { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
          volumeMounts: [
            { name: "workspace", mountPath: SANDBOX_WORKSPACE },
            { name: "tmp", mountPath: "/tmp" },
            ...mounts.map((m, i) => ({ name: `ro-${i}`, mountPath: m.sandboxPath, readOnly: true })),
          ],
        },
      ],
      volumes: [
        { name: "workspace", emptyDir: { sizeLimit: `${s.workspaceMb}Mi` } },
        { name: "tmp", emptyDir: { medium: "Memory", sizeLimit: `${s.tmpSizeMb}Mi` } },
        ...mounts.map((m, i) => ({ name: `ro-${i}`, hostPath: { path: m.hostPath, type: "Directory" } })),
      ],
    },
  };
}

/** Deny all ingress and egress of the pod (effective where the CNI enforces NetworkPolicy). */
export function networkPolicySpec(podName: string): V1NetworkPolicy {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: podName, labels: { "arbor.sandbox": "1" } },
    spec: { podSelector: { matchLabels: { "arbor.pod": podName } }, policyTypes: ["Ingress", "Egress"], ingress: [], egress: [] },
  };
}

/**
 * The command line of exec `execId`: per-process CPU-time and file-size limits (pods have no
 * rlimit field; dash's `ulimit -f` counts 512-byte blocks), the pid recorded for the wall-clock
 * kill, the working directory and environment, then `argv`.
 */
export function execCommand(
  execId: number,
  argv: readonly string[],
  o: { cwd: string; env?: Record<string, string>; cpuSeconds: number; maxFileMb: number },
): string[] {
  const blocks = Math.floor((o.maxFileMb * 1024 * 1024) / 512);
  const env = Object.entries({ ...BASE_ENV, ...(o.env ?? {}) }).map(([k, v]) => `${k}=${v}`);
  const prelude = `ulimit -t ${o.cpuSeconds} && ulimit -f ${blocks} && cd "$1" && shift && ${RECORD_PID.replace("$0", "$ARBOR_EXEC")}`;
  return ["env", "-i", ...env, `ARBOR_EXEC=${execId}`, "/bin/sh", "-c", prelude, "arbor-exec", o.cwd, ...argv];
}

/** The command that kills exec `execId`'s process tree. */
export function killCommand(execId: number): string[] {
  return ["/bin/sh", "-c", KILL_TREE, String(execId)];
}

/** The command that writes its stdin to `relPath` (creating directories), as the sandbox user. */
export function writeCommand(relPath: string): string[] {
  return ["/bin/sh", "-c", 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"', "arbor-write", relPath];
}

/** Exit code from the status the exec API reports at the end of a command. */
export function exitCodeOf(status: V1Status | undefined): number | null {
  if (!status) return null;
  if (status.status === "Success") return 0;
  const cause = status.details?.causes?.find((c) => c.reason === "ExitCode");
  const code = cause?.message === undefined ? NaN : Number(cause.message);
  return Number.isInteger(code) ? code : null;
}
