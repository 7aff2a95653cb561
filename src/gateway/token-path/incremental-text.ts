// Text deltas of a streamed token-path answer, decoded by the engine's own detokenizer: the ids so
// far are decoded whole and the new suffix is emitted, so a character split over several byte
// tokens is never broken (a trailing U+FFFD, an incomplete UTF-8 sequence, is held back until it
// completes) and the deltas add up to exactly the text the non-streamed answer has.
import { ArborError } from "../../core/errors.js";

type Detokenize = (ids: number[]) => Promise<string>;

/** One answer's decoder; {@link next} with the growing id list, {@link finish} with the final content ids. */
export class IncrementalText {
  private sent = "";

  constructor(private readonly detokenize: Detokenize) {}

  /** Text emitted so far. */
  get text(): string {
    return this.sent;
  }

  /**
   * The text `ids` (a prefix of the final content ids) add beyond what was emitted. A decode that
   * does not extend the emitted text (a tokenizer that rewrites earlier text) emits nothing yet.
   */
  async next(ids: number[]): Promise<string> {
    if (ids.length === 0) return "";
    let text = await this.detokenize(ids);
    if (text.endsWith("\uFFFD")) text = text.slice(0, -1);
    if (text.length <= this.sent.length || !text.startsWith(this.sent)) return "";
    const delta = text.slice(this.sent.length);
    this.sent = text;
    return delta;
  }

  /**
   * The whole answer text of `ids` (the final content ids) and what it adds to the emitted text.
   * Throws when it does not extend what the client already got: the stream cannot be made whole.
   */
  async finish(ids: number[]): Promise<{ text: string; delta: string }> {
    const text = ids.length > 0 ? await this.detokenize(ids) : "";
    if (!text.startsWith(this.sent)) {
      throw new ArborError(
        `token path: the decoded answer ${JSON.stringify(text.slice(0, 80))} does not continue the streamed text ${JSON.stringify(this.sent.slice(0, 80))}`,
        "backend_protocol",
      );
    }
    const delta = text.slice(this.sent.length);
    this.sent = text;
    return { text, delta };
  }
}
