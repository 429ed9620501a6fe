/**
 * Renders chat messages into one prompt string the way a ChatML template (Qwen, many others)
 * does: `<|im_start|>{role}\n{content}<|im_end|>\n` per message, then the generation prompt
 * `<|im_start|>assistant\n` (or, with `continue_final_message`, the last message left open).
 * Turn N+1's rendering therefore starts with turn N's rendering plus
 * the reply, which is what lets a real engine's prefix cache serve a conversation.
 *
 * Content is a string, null (an assistant turn with only tool calls) or OpenAI content parts, of
 * which the text parts are joined with nothing between them. Known gaps: tools, images,
 * `reasoning_content` and `name` are not rendered.
 */

/** One OpenAI content part; only `type: "text"` parts contribute. */
export interface ContentPart {
  /** `text`, `image_url`, ... */
  type: string;
  /** The text of a text part. */
  text?: string;
}

/** A chat message as the OpenAI API carries it. */
export interface ChatMessage {
  /** `system`, `user`, `assistant`, `tool`, ... */
  role: string;
  /** A string, text parts, or null/absent for none. */
  content?: string | readonly ContentPart[] | null;
}

/** The text of a message's content: the string itself, or its text parts joined. */
export function contentText(content: ChatMessage["content"]): string {
  if (typeof content === "string") return content;
  if (!content) return "";
  let text = "";
  for (const part of content) {
    if (part.type === "text" && typeof part.text === "string") text += part.text;
  }
  return text;
}

/** How a chat is rendered after its messages (vLLM's and sglang's request fields). */
export interface RenderOptions {
  /** End with `<|im_start|>assistant\n` (default true). */
  addGenerationPrompt?: boolean;
  /**
   * Leave the last message open (no `<|im_end|>` after it), so generation continues its text
   * (default false; then `addGenerationPrompt` must be false, as transformers requires).
   */
  continueFinalMessage?: boolean;
}

/**
 * The ChatML rendering of `messages`, ending with the assistant generation prompt, or, to
 * continue the last message, with that message's text left open: a stream continued from the
 * text it had sent renders exactly as its unbroken prompt plus that text.
 */
export function renderChat(messages: readonly ChatMessage[], o: RenderOptions = {}): string {
  const open = o.continueFinalMessage === true;
  if (open && o.addGenerationPrompt === true) {
    throw new RangeError("continue_final_message and add_generation_prompt cannot both be true");
  }
  let text = "";
  messages.forEach((m, i) => {
    text += `<|im_start|>${m.role}\n${contentText(m.content)}`;
    if (!open || i < messages.length - 1) text += "<|im_end|>\n";
  });
  return open || o.addGenerationPrompt === false ? text : text + "<|im_start|>assistant\n";
}
