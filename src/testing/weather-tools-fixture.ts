// Test fixture for tool calling through the gateway: a scripted policy that calls get_weather for
// the city asked about, the tool's JSON schema, and an OpenAI Agents SDK agent using it. The tiny
// policy is untrained and never calls tools, so the scripted executor writes the policy's markup.
import { Agent, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled, tool } from "@openai/agents";
import OpenAI from "openai";
import { z } from "../core/zod.js";
import { ScriptedExecutor } from "./scripted-executor.js";
import { startEngineServer, type ListeningEngineServer } from "../engine/server.js";

/**
 * A policy that calls get_weather for the city asked about (or continues a call the request
 * forced), then answers with the tool's result.
 */
export function weatherPolicy(): ScriptedExecutor {
  return new ScriptedExecutor((prompt) => {
    const result = /<\|tool\|>([^<]*)<\|end\|><\|assistant\|>$/.exec(prompt);
    if (result) return `It is ${result[1]}.`;
    if (prompt.endsWith("<|tool_call|>get_weather ")) return '{"city":"Oslo"}<|/tool_call|>';
    if (!prompt.includes("You can call these tools")) return "I have no tools.";
    const city = [...prompt.matchAll(/Weather in (\w+)\?/g)].pop()?.[1] ?? "Oslo";
    return `Checking.<|tool_call|>get_weather {"city":"${city}"}<|/tool_call|>`;
  });
}

export const weatherTool = { name: "get_weather", description: "Current weather", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } };

/**
 * An Agents SDK agent with a get_weather tool answering `<len(city)+10>C`, speaking the Responses
 * API to `baseURL` as the SDK's default client; `asked` lists the cities the tool was called for.
 */
export function weatherAgent(baseURL: string): { agent: Agent; asked: string[] } {
  setTracingDisabled(true);
  setOpenAIAPI("responses");
  const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
  // Same class at run time; the SDK's .d.ts resolve `openai` in CommonJS mode, so TypeScript sees two types.
  setDefaultOpenAIClient(client as unknown as Parameters<typeof setDefaultOpenAIClient>[0]);
  const asked: string[] = [];
  const getWeather = tool({
    name: "get_weather",
    description: "Current weather",
    parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      asked.push(city);
      return `${city.length + 10}C`;
    },
  });
  const agent = new Agent({ name: "weather", instructions: "Answer with the weather.", model: "arbor-tiny", tools: [getWeather] });
  return { agent, asked };
}

/** Start the built-in engine "scripted" (policy version 2, 4096-token context) answering with `policy`. */
export function startScriptedEngine(policy: ScriptedExecutor): Promise<ListeningEngineServer> {
  return startEngineServer({ name: "scripted", modelPath: "", policyVersion: 2, sequences: 2, contextSize: 4096, maxWaiting: 8, executor: policy });
}
