// Arbor's public API: what `import … from "arbor-rl"` gives (package.json `exports`). Kept small on purpose:
// agents (white-box SDK), the program-aware gateway with its backends, the trajectory store, sandboxes, the
// run config and the record types they share. Everything else (engines, trainer, rollout, CLI wiring) is
// reached through the `arbor` command and may change without notice. README.md "Use as a library" shows it.

// Agents: declare tools and an agent that plays one episode through a program's gateway endpoint.
export { defineAgent } from "./agents/define-agent.js";
export type { Agent, AgentDefinition, AgentLimits, AgentOutcome, AgentRunOptions } from "./agents/define-agent.js";
export { defineTool } from "./agents/agent-tool.js";
export type { AgentTool, AgentToolResult, ToolContext } from "./agents/agent-tool.js";

// The gateway and the engines behind it (Arbor's, vLLM, SGLang, llama-server, any OpenAI-compatible server).
export { createGateway, PROGRAM_HEADER } from "./gateway/server.js";
export type { Gateway, GatewayOptions } from "./gateway/server.js";
export { createBackend } from "./backends/registry.js";
export type { Backend, TokenBackend } from "./backends/backend.js";

// The trajectory store: programs, calls (token ids, logprobs, policy versions) and rewards.
export { createStore, openStore } from "./store/registry.js";
export type { PostgresStoreConfig, SqliteStoreConfig, StoreConfig } from "./store/registry.js";
export type { TrajectoryStore } from "./store/trajectory-store.js";

// Sandboxes for tools (bwrap, docker, k8s).
export { createSandboxProvider } from "./sandbox/registry.js";
export type { Sandbox, SandboxProvider } from "./sandbox/sandbox.js";

// Your own environments and rewards (`env.module`, `reward.custom`; examples/custom-env): the types they implement.
export type { CheckContext, CheckResult, Environment, SetupOptions, SetupReport, Task, Tool, ToolResult } from "./envs/env.js";
export type { RewardContext, RewardFn, RewardValue, StepwiseValue } from "./reward/reward-fn.js";

// The run config `arbor run` reads (YAML), validated with the messages the command prints.
export { loadRunConfig, parseRunConfig } from "./core/config.js";
export type { BackendConfig, EngineConfig, RunConfig } from "./core/config.js";

// Shared records, the clock and errors.
export type { Call, ChatMessage, Group, PolicyVersion, Program, Reward, Termination, TerminationKind, TraceSink, Trajectory } from "./core/types.js";
export type { Clock } from "./core/clock.js";
export { realClock } from "./core/real-clock.js";
export { ArborError } from "./core/errors.js";
