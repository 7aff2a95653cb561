// @huggingface/jinja as the chat-template renderer loads it: the build's copy beside this module
// (huggingface-jinja.js, written by scripts/lower-jinja.mjs: the package's code with class fields as
// constructor assignments, which renders ~4× faster on Node 20) when there is one, else the package itself
// (running from the sources, or a build without it). Both are the same code and render the same text.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

type JinjaModule = typeof import("@huggingface/jinja");

const buildCopy = new URL("./huggingface-jinja.js", import.meta.url);

/** Which copy is loaded: "build" (the lowered one beside this module) or "package". */
export const jinjaLibrarySource: "build" | "package" = existsSync(fileURLToPath(buildCopy)) ? "build" : "package";

const lib: JinjaModule = jinjaLibrarySource === "build" ? ((await import(buildCopy.href)) as JinjaModule) : await import("@huggingface/jinja");

export const { Environment, Interpreter, Template } = lib;
export type Template = InstanceType<JinjaModule["Template"]>;
