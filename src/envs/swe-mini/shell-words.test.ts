import { describe, expect, it } from "vitest";
import { shellWords } from "./shell-words.js";

describe("shellWords", () => {
  it("splits words and honours quotes and backslashes, without any expansion", () => {
    expect(shellWords("node --test  test/")).toEqual(["node", "--test", "test/"]);
    expect(shellWords(`node -e "console.log(\\"a b\\")" 'x y' z\\ w $HOME`)).toEqual(["node", "-e", 'console.log("a b")', "x y", "z w", "$HOME"]);
    expect(shellWords(`a "" ''`)).toEqual(["a", "", ""]);
    expect(() => shellWords("node 'oops")).toThrow(/unterminated ' quote/);
    expect(() => shellWords('node "oops')).toThrow(/unterminated " quote/);
  });
});
